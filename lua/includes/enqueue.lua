-- enqueue: a new run (`-- @include enqueue`).
-- @needs time, util, lanes, wakes, limits, leases, rates, caps, groups, records
--
-- Stores one new run (see lua/enqueue.lua for what each argument means) and makes it due, parks
-- it in its workflow's delayed set, or claims it for a parked worker (the fast path). Idempotent
-- on the run id. `waited`: who waits on the run's outcome, stored as its 'waited' field (see
-- finishRun: '1' for the run's done channel, else a run() caller's inbox), '' for nobody.
-- Returns created (1 new run, or the retry of this very enqueue call whose reply
-- was lost, told by its nonce | 0 existing run) and the run's state ('active' = fast-pathed); for
-- a run handed over a worker's handoff channel, also its lease token and the worker's id.
-- `compact`: store the lean record whatever the layout (see storeRun). `check`: look for an
-- existing run first; false only for a generated id's first try, which no run can have yet.

-- Set by every write to this include's per-call tables (see lib/redis/lua.library.ts).
local enqueueDirty = false
-- Lanes this call made runs due in: they have due runs for the rest of it (enqueues claim
-- nothing), so a batch's later runs skip the look.
local lanesMadeDue = {}
-- The worker id of the caller's own process (lua/enqueue.lua), or '': a handoff to that worker is
-- not published, as the caller starts the run from this call's reply (see deliverHandoff).
local handoffSelf = ''

-- A park announcement's parts (see parkedLease), in a memo (util.lua): a worker's entry is the
-- same at each of its parks, and two pattern matches cost more than the rest of a handoff's Lua.
-- entry -> { lease ms text or false, worker id or false }.
local PARKED_ENTRIES = newMemo()
local function parkedEntry(entry)
  return PARKED_ENTRIES.values[entry]
    or remember(PARKED_ENTRIES, entry, { string.match(entry, ':(%d+)$') or false, string.match(entry, '^(.+):h:%d+$') or false })
end

-- The enqueue fast path's look for a parked worker (see lua/enqueue.lua): returns the lease length
-- a handoff to it gets, or nil. A parked worker first: without one (a producer's usual case)
-- nothing else is worth a look. Then nothing due ahead in the lane, nor in the wake list (empty
-- lists and zsets do not exist), and room under every cap: one EXISTS answers for the keys and the
-- limits hash. The worker parked last is taken off at once (it is woken by this handoff, so it
-- counts as parked no longer): if its announcement lapsed, every other one has too, and it is
-- garbage. Its announcement ends in its lease length, which the handed-off run gets from the start.
-- Also returns the worker's id, if its announcement names one ('<id>:h:<lease ms>': the worker
-- listens on 'handoff:<id>'; older workers' entries, '<id>:<lease ms>', name none).
-- `limitsKey` and `wakeKey` may be nil (enqueuePlain): made here, once a parked worker is found.
local function parkedLease(base, limitsKey, workflow, group, lane, wakeKey, lockMs)
  local parkedKey = wfKey(base, workflow, 'parked')
  local parked = redis.call('ZPOPMAX', parkedKey)
  if #parked == 0 or tonumber(parked[2]) < nowMs() then return nil end
  limitsKey, wakeKey = limitsKey or base .. 'limits', wakeKey or lane .. 'wake'
  if noneExist(limitsKey, lane .. 'queue', lane .. 'waiting', wakeKey)
      and primeLimits(limitsKey, workflow) and namespaceRoom(KEYS_LEASES, limitsKey) and workflowRoom(base, limitsKey, workflow)
      and (group == '' or groupRoom(base, limitsKey, workflow, group)) then
    local parts = parkedEntry(parked[1])
    return steadyNumber(parts[1] or lockMs), parts[2] or nil
  end
  redis.call('ZADD', parkedKey, parked[2], parked[1]) -- still parked: no handoff after all
  return nil
end

-- Hands a run to the parked worker parkedLease found: published on its handoff channel if it has
-- one (the worker's blocking read then stays under way: no read to send again per run), else
-- pushed onto the wake list it blocks on. Returns the run's first lease token, or nil if the
-- publish reached no subscriber (the worker's connection is gone): the run is queued instead.
-- Not published to the caller's own process's worker (handoffSelf): the caller starts the run
-- from this call's reply, so a publish would cost Redis a command and a socket write, and the
-- process a message to pass over. Should that reply be lost, nothing starts the run: its lease
-- lapses and the stalled scan makes it due again, as for a worker that died holding it.
local function deliverHandoff(base, listener, wakeKey, workflow, id, input, idTimed, compact)
  local token = firstLeaseToken(base, id, idTimed, compact)
  if not listener then
    redis.call('RPUSH', wakeKey, handoffEntry(token, id, input))
  elseif listener ~= handoffSelf and publish(base .. 'handoff:' .. listener, workflow .. ' ' .. handoffEntry(token, id, input)) == 0 then
    return nil
  end
  return token
end

-- A fast-pathed run's claim (its record already written with its first lease, see storeRun, and
-- delivered to the parked worker, see deliverHandoff): counted active and leased.
local function handOff(base, limitsKey, workflow, group, lane, id, leaseMs)
  redis.call('SADD', wfKey(base, workflow, 'active'), id)
  if group ~= '' then
    redis.call('SADD', lane .. 'active', id)
    redis.call('SADD', wfKey(base, workflow, 'groups'), group)
  end
  redis.call('ZADD', KEYS_LEASES, intText(nowMs() + leaseMs), id)
  noteStart(base, limitsKey, workflow, group)
end

-- Whether a run with this id exists: its 'created' (1 if this very call, told by its nonce, made
-- it) and state, or nil.
local function existingRun(runKey, nonce)
  local existing = redis.call('HMGET', runKey, 'state', 'nonce')
  if existing[1] then return (nonce ~= '' and existing[2] == nonce) and 1 or 0, existing[1] end
  return nil
end

local function enqueueRun(base, id, workflow, input, priority, delayMs, runAt, maxAttempts, group, fastPath, lockMs, waited, nonce, trace, timeoutMs, compact, check)
  local runKey, limitsKey = base .. 'run:' .. id, base .. 'limits'
  if check then
    local created, state = existingRun(runKey, nonce)
    if created then return created, state end
  end

  local lane = laneOf(base, workflow, group)
  local wakeKey = wfKey(base, workflow, 'wake')
  -- nil: due at once, which needs no clock. Numbers arrive as text, and tonumber is a strtod:
  -- the common '0' is told by comparison.
  local due = nil
  if runAt ~= '' then due = tonumber(runAt) elseif delayMs ~= '0' then due = nowMs() + tonumber(delayMs) end

  local state = 'waiting'
  local leaseMs, token, listener
  if due and due > nowMs() then
    state = 'delayed'
  elseif fastPath and trace == '' and timeoutMs == '' and not lanesMadeDue[lane] then
    leaseMs, listener = parkedLease(base, limitsKey, workflow, group, lane, wakeKey, lockMs)
    token = leaseMs and deliverHandoff(base, listener, wakeKey, workflow, id, input, nonce == '', compact)
    if token then state = 'active' end
  end

  -- One HSET for the whole record: who waits on it and, for a fast-pathed run, its first lease
  -- (storeRun) ride along with the fields every run has.
  local extra = nil
  if waited ~= '' or trace ~= '' or timeoutMs ~= '' then
    extra = {}
    if waited ~= '' then extra[#extra + 1], extra[#extra + 2] = 'waited', waited end
    if trace ~= '' then extra[#extra + 1], extra[#extra + 2] = 'trace', trace end
    if timeoutMs ~= '' then extra[#extra + 1], extra[#extra + 2] = 'timeoutMs', timeoutMs end
  end
  -- Only an enqueue of generated ids sends no nonce (lib/redis/commands): its id carries the time.
  storeRun(base, id, workflow, input, state, priority, maxAttempts, group, due, 'nonce', nonce, compact, nonce == '', extra, token)

  if state == 'active' then
    handOff(base, limitsKey, workflow, group, lane, id, leaseMs)
    return 1, state, token, listener
  elseif state == 'delayed' then
    -- Workers sleep until the earliest due time they know of; an earlier one must wake them.
    local delayedKey = wfKey(base, workflow, 'delayed')
    local head = redis.call('ZRANGE', delayedKey, 0, 0, 'WITHSCORES')
    redis.call('ZADD', delayedKey, due, id)
    if #head == 0 or tonumber(head[2]) > due then wake(wakeKey) end
  else
    makeDue(base, limitsKey, base .. 'seq', workflow, group, id, priority, false)
    lanesMadeDue[lane], enqueueDirty = true, true
  end
  return 1, state
end

-- enqueueRun for a run with every option at its default (priority 0, due at once, the default
-- attempts, no group, trace or time limit), alone in its call: the same reads, writes and
-- replies, without the branches those options and a batch take (lua/enqueue.lua's common call).
-- `runKey`: the run's key, as the call passed it (base .. 'run:' .. id). `laneEmpty`: the caller
-- found the lane empty already (lua/enqueue.lua's first lines).
local function enqueuePlain(runKey, base, id, workflow, input, waited, nonce, fastPath, lockMs, compact, check, laneEmpty)
  if check then
    local created, state = existingRun(runKey, nonce)
    if created then return created, state end
  end
  -- Keys are made as they are needed: each is a new string for Redis to allocate and collect.
  local lane = laneOf(base, workflow, '')
  local queueKey = lane .. 'queue'
  -- A producer's run appended behind the runs its lane holds already (producers ahead of their
  -- workers, the usual backlog), which is then all there is to do: RPUSHX appends only to a list
  -- that exists, and an empty list does not. No handoff (something is due ahead of the run, see
  -- parkedLease) and no wake (the first run's enqueue left a marker, which either is still there
  -- or woke a worker whose claim is yet to run: it takes this run too, or passes the marker on
  -- when its batch fills up, see claimRuns; or a cap holds the lane back, and a freed slot wakes
  -- it, see wakeCapped): a look for a parked worker and one at the wake list would each cost a
  -- command. A caller that waits on the run (run()) looks for a parked worker first instead: it
  -- is waited for, so a worker is likely ready, and the RPUSHX would be the command wasted.
  local behind = not laneEmpty and waited == '' and redis.call('RPUSHX', queueKey, id) > 0
  local leaseMs, listener, token
  if fastPath and not behind then leaseMs, listener = parkedLease(base, nil, workflow, '', lane, nil, lockMs) end
  if leaseMs then token = deliverHandoff(base, listener, lane .. 'wake', workflow, id, input, nonce == '', compact) end
  if compact and nonce == '' and waited == '' and not token then
    -- storeRun's lean record of a generated id, nobody waiting: its three fields, without the
    -- table of arguments storeRun builds (a producer's common enqueue).
    redis.call('HSET', runKey, 'workflow', workflow, 'input', input, 'state', 'waiting')
  else
    storeRun(base, id, workflow, input, token and 'active' or 'waiting', '0', DEFAULT_MAX_ATTEMPTS, '', nil, 'nonce', nonce,
      compact, nonce == '', waited ~= '' and { 'waited', waited } or nil, token)
  end
  if token then
    handOff(base, base .. 'limits', workflow, '', lane, id, leaseMs)
    return 1, 'active', token, listener
  end
  -- makeDue's work for an ungrouped run, with the lane and wake list at hand: the first run of an
  -- empty lane wakes a worker (a run queued behind others needs no wake, as above).
  if not behind and redis.call('RPUSH', queueKey, id) == 1 then wakeOnce(lane .. 'wake') end
  return 1, 'waiting'
end
