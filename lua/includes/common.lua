-- Shared helpers, inlined into every script by the loader (`-- @include common`).
-- Key names follow lib/redis/redis.keys.ts; keep the two in step.

-- Milliseconds from the Redis clock: workers' clocks may be skewed, the server's is the one truth.
-- Read once per call: every time a call records (a start, a lease, a rate window) is the same.
local callNow = nil
local function nowMs()
  if not callNow then
    local t = redis.call('TIME')
    callNow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return callNow
end

-- nowMs() as text, formatted once per call: a number handed to redis.call is formatted anew
-- each time (an snprintf), and a batch of enqueues writes the time into every run.
local callNowText = nil
local function nowText()
  if not callNowText then callNowText = string.format('%.0f', nowMs()) end
  return callNowText
end

-- Every script's base is ARGV[1] and its leases zset ends in 'leases': the one active index that
-- is a zset (activeCount and friends tell it from the sets by name).
local KEYS_LEASES = ARGV[1] .. 'leases'

-- The keys of a workflow: base .. 'wf:' .. name .. ':' .. suffix.
local function wfKey(base, workflow, suffix)
  return base .. 'wf:' .. workflow .. ':' .. suffix
end

-- A lane is where due runs queue: a workflow's ungrouped runs, or one group of a workflow. Its
-- keys are lane .. 'queue' (list, priority 0, FIFO: the cheap common case) and lane ..
-- 'waiting' (zset, priority > 0); a group lane also has lane .. 'active' (set).
local function laneOf(base, workflow, group)
  if group and group ~= '' then return base .. 'wf:' .. workflow .. ':g:' .. group .. ':' end
  return base .. 'wf:' .. workflow .. ':'
end

-- Waiting score: higher priority first, FIFO within a priority. Priority takes the top 20 bits,
-- a namespace sequence the low 32, which keeps the score an exact integer in a double (< 2^53).
-- Formatted with %.0f because tostring() would round it to 14 significant digits.
local MAX_PRIORITY = 1048575
local function bandScore(priority, seq)
  return string.format('%.0f', (MAX_PRIORITY - tonumber(priority)) * 4294967296 + seq)
end

-- Makes a run due in its lane: at the back of its priority, or at the front (a run that was
-- already started once: stalled, or handed back at shutdown).
local function pushDue(lane, seqKey, id, priority, front)
  priority = tonumber(priority) or 0 -- a compact run record omits priority 0 (see storeRun)
  if priority == 0 then
    redis.call(front and 'LPUSH' or 'RPUSH', lane .. 'queue', id)
  else
    local seq = 0
    if not front then seq = redis.call('INCR', seqKey) % 4294967296 end
    redis.call('ZADD', lane .. 'waiting', bandScore(priority, seq), id)
  end
end

-- Per-call caches (noPriorities, dryLanes, activeCache, limitCache, and the rings in claim.lua)
-- are sound because every script makes runs due (pushDue) before it claims (popDue), never after:
-- keep that order when adding to a script.

-- Lanes whose priority zset this call found empty. Only pushDue adds to a zset, and claiming
-- (the caller of popDue) never does, so an empty zset stays empty for the rest of a claim pass:
-- most lanes hold only priority-0 runs, and this spares them a ZPOPMIN per claim.
local noPriorities = {}

local function dueCount(lane)
  local count = redis.call('LLEN', lane .. 'queue')
  if noPriorities[lane] then return count end
  return count + redis.call('ZCARD', lane .. 'waiting')
end

-- Whether a lane has due runs (cheaper than dueCount: stops at the first non-empty key).
local function laneHasDue(lane)
  return redis.call('LLEN', lane .. 'queue') > 0 or (not noPriorities[lane] and redis.call('ZCARD', lane .. 'waiting') > 0)
end

-- Lanes this call found dry, for the same reason as noPriorities.
local dryLanes = {}

-- Takes the next due run of a lane: priorities first, then the FIFO list.
local function popDue(lane)
  if dryLanes[lane] then return false end
  if not noPriorities[lane] then
    local top = redis.call('ZPOPMIN', lane .. 'waiting')
    if #top > 0 then return top[1] end
    noPriorities[lane] = true
  end
  local id = redis.call('LPOP', lane .. 'queue')
  if not id then dryLanes[lane] = true end
  return id
end

-- A wake list ends in at most one marker: one blocked worker wakes, claims what it can, and
-- passes the marker on if work is left (see reserve). Fast-path handoffs may sit before it; a
-- marker goes after them, so the worker that takes a handoff also learns of the queued runs.
-- A list this call has seen end in the marker keeps ending in it for the rest of the call:
-- scripts never pop a marker (takeHandoff leaves one at the head), remove only handoff entries,
-- and push a handoff only onto an empty list; so each list is looked at once per call.
local markedWakeLists = {}
local function wake(wakeKey)
  if markedWakeLists[wakeKey] then return end
  if redis.call('LINDEX', wakeKey, -1) ~= '1' then
    redis.call('RPUSH', wakeKey, '1')
  end
  markedWakeLists[wakeKey] = true
end

-- Announces a worker as about to block on its workflows' wake lists until now + ttlMs (see
-- park.lua), so the enqueue fast path hands it runs. Expired entries go as a new one comes.
local function parkWorker(base, workerEntry, ttlMs, workflows)
  local now = nowMs()
  for _, wf in ipairs(workflows) do
    local parkedKey = wfKey(base, wf, 'parked')
    redis.call('ZREMRANGEBYSCORE', parkedKey, '-inf', now)
    redis.call('ZADD', parkedKey, now + ttlMs, workerEntry)
  end
end

-- A wake list entry other than the '1' marker is a handoff: a run the enqueue fast path already
-- claimed, ready to execute, as '<token> <id> <input>' (tokens and ids contain no spaces).
local function handoffEntry(token, id, input)
  return token .. ' ' .. id .. ' ' .. input
end

-- Caps, read from the limits hash (never from the caller), each once per script call: they
-- cannot change during one. false = no cap.
local limitCache = {}
local function cacheLimit(field, raw)
  if raw then raw = tonumber(raw) end
  limitCache[field] = raw
  return raw
end

local function limitOf(limitsKey, field)
  local limit = limitCache[field]
  if limit == nil then limit = cacheLimit(field, redis.call('HGET', limitsKey, field)) end
  return limit
end

-- Reads several fields of the limits hash in one HMGET into the per-call cache: a call that
-- will need them (a claim pass: the namespace cap, the controls count, each workflow's cap…)
-- pays one command instead of one each. Returns true (usable inside a condition).
local function primeLimits(limitsKey, fields)
  local values = redis.call('HMGET', limitsKey, unpack(fields))
  for i, field in ipairs(fields) do cacheLimit(field, values[i]) end
  return true
end

-- The fields a claim pass over these workflows reads in the common case (see primeLimits), with
-- `finishing` those countFinished reads too, and with `reserving` the flag of a rate review
-- under way (see startRateReview).
local function claimFields(workflows, finishing, reserving)
  local fields = { 'ns', 'controls' }
  if finishing then fields[#fields + 1] = 'completed-watch' end
  for _, wf in ipairs(workflows) do
    fields[#fields + 1] = 'wf:' .. wf
    fields[#fields + 1] = 'wf:' .. wf .. ':overrides'
    fields[#fields + 1] = 'wf:' .. wf .. ':group'
    if reserving then fields[#fields + 1] = 'wf:' .. wf .. ':rate-review' end
    if finishing then
      fields[#fields + 1] = 'wf:' .. wf .. ':keep:completed'
      fields[#fields + 1] = 'wf:' .. wf .. ':index-completed'
      fields[#fields + 1] = 'wf:' .. wf .. ':ttl-max'
    end
  end
  return fields
end

-- A group's cap: its own override, else the workflow's default for every group. The field
-- 'wf:<name>:overrides' counts a workflow's overrides (see set-limits), so the common case — no
-- overrides — costs one read per workflow, not one per group.
local function groupLimit(limitsKey, workflow, group)
  if limitOf(limitsKey, 'wf:' .. workflow .. ':overrides') then
    local override = limitOf(limitsKey, 'wf:' .. workflow .. ':g:' .. group)
    if override then return override end
  end
  return limitOf(limitsKey, 'wf:' .. workflow .. ':group')
end

-- Active counts (sizes of the leases zset and the active sets), each read once per call and then
-- kept current by this call's own writes through addActive/removeActive.
local activeCache = {}
local function activeCount(key)
  local count = activeCache[key]
  if count == nil then
    count = redis.call(key == KEYS_LEASES and 'ZCARD' or 'SCARD', key)
    activeCache[key] = count
  end
  return count
end

local function addActive(key, id, score)
  local added
  if score then added = redis.call('ZADD', key, score, id) else added = redis.call('SADD', key, id) end
  if added == 1 and activeCache[key] then activeCache[key] = activeCache[key] + 1 end
end

local function removeActive(key, id)
  local removed = redis.call(key == KEYS_LEASES and 'ZREM' or 'SREM', key, id)
  if removed == 1 and activeCache[key] then activeCache[key] = activeCache[key] - 1 end
end

-- Pauses and rate limits ("controls") are fields of the limits hash too (see writeControl):
--   wf:<name>:paused, wf:<name>:g:<group>:paused (counted in wf:<name>:paused-groups);
--   wf:<name>:rate + :rate-ms (max starts per window of ms), wf:<name>:group-rate + :group-rate-ms
--   (every group's default), wf:<name>:g:<group>:rate + :rate-ms (an override, counted in
--   wf:<name>:rate-overrides).
-- The field 'controls' counts every pause and rate limit set in the namespace: while it is absent
-- (the common case), a claiming call pays that one read for all of this.
local function controlsOn(limitsKey)
  return limitOf(limitsKey, 'controls')
end

-- Sets (value ~= '') or removes a control field, keeping the counters named in `counters` (fields
-- of the limits hash) in step with whether the field is present. Returns the previous value.
local function writeControl(limitsKey, field, value, counters)
  local previous = redis.call('HGET', limitsKey, field) or ''
  if value == '' then redis.call('HDEL', limitsKey, field) else redis.call('HSET', limitsKey, field, value) end
  if (previous == '') ~= (value == '') then
    for _, counter in ipairs(counters) do
      if redis.call('HINCRBY', limitsKey, counter, value == '' and -1 or 1) <= 0 then redis.call('HDEL', limitsKey, counter) end
    end
  end
  limitCache = {}
  return previous
end

-- The rate limit that holds for a workflow, or for one of its groups (its override, else the
-- default of every group): max starts and window length in ms, or nil.
local function workflowRate(limitsKey, workflow)
  if not controlsOn(limitsKey) then return nil end
  local max = limitOf(limitsKey, 'wf:' .. workflow .. ':rate')
  if max then return max, limitOf(limitsKey, 'wf:' .. workflow .. ':rate-ms') end
  return nil
end

local function groupRate(limitsKey, workflow, group)
  if not controlsOn(limitsKey) then return nil end
  if limitOf(limitsKey, 'wf:' .. workflow .. ':rate-overrides') then
    local max = limitOf(limitsKey, 'wf:' .. workflow .. ':g:' .. group .. ':rate')
    if max then return max, limitOf(limitsKey, 'wf:' .. workflow .. ':g:' .. group .. ':rate-ms') end
  end
  local max = limitOf(limitsKey, 'wf:' .. workflow .. ':group-rate')
  if max then return max, limitOf(limitsKey, 'wf:' .. workflow .. ':group-rate-ms') end
  return nil
end

-- A rate-limited level keeps its recent starts in a list (newest first, at most `max` long, key
-- <level>rate-log): it may start a run unless the max-th newest start is still inside the window.
-- Returns nil if it may, else when it may again (ms). O(1): the list is trimmed to `max`, so its
-- max-th entry is its tail.
local function rateFreeAt(logKey, max, perMs)
  local oldest = redis.call('LINDEX', logKey, max - 1)
  if oldest and tonumber(oldest) + perMs > nowMs() then return tonumber(oldest) + perMs end
  return nil
end

-- The earliest time a rate limit this call met frees (the reserve reply tells the worker to come
-- back then instead of polling), or nil.
local rateWakeAt = nil
local function noteRateHold(freeAt)
  if not rateWakeAt or freeAt < rateWakeAt then rateWakeAt = freeAt end
end

-- Notes the earliest window of the groups the workflows' rate limits hold back (their
-- `rate-held` zsets, see holdGroup): a claim does not look at them, a reserve frees them.
local function noteHeldGroups(base, limitsKey, workflows)
  if not controlsOn(limitsKey) then return end
  for _, wf in ipairs(workflows) do
    local first = redis.call('ZRANGE', wfKey(base, wf, 'rate-held'), 0, 0, 'WITHSCORES')
    if #first > 0 then noteRateHold(tonumber(first[2])) end
  end
end

-- Adds a start (the call's Redis time, the same as the claim's) to a level's rate log.
local function recordStart(logKey, max, perMs)
  redis.call('LPUSH', logKey, nowMs())
  redis.call('LTRIM', logKey, 0, max - 1)
  redis.call('PEXPIRE', logKey, perMs)
end

-- Records one run start at every rate-limited level of a claim.
local function noteStart(base, limitsKey, workflow, group)
  if not controlsOn(limitsKey) then return end
  local max, perMs = workflowRate(limitsKey, workflow)
  if max then recordStart(wfKey(base, workflow, 'rate-log'), max, perMs) end
  if group ~= '' then
    max, perMs = groupRate(limitsKey, workflow, group)
    if max then recordStart(laneOf(base, workflow, group) .. 'rate-log', max, perMs) end
  end
end

-- Room at each level: the namespace counts leases (every claimed run holds one).
local function namespaceRoom(leasesKey, limitsKey)
  local limit = limitOf(limitsKey, 'ns')
  return not limit or activeCount(leasesKey) < limit
end

-- A paused workflow has no room; a rate-limited one has none while its window is full.
local function workflowRoom(base, limitsKey, workflow)
  if controlsOn(limitsKey) then
    if limitOf(limitsKey, 'wf:' .. workflow .. ':paused') then return false end
    local max, perMs = workflowRate(limitsKey, workflow)
    local freeAt = max and rateFreeAt(wfKey(base, workflow, 'rate-log'), max, perMs)
    if freeAt then
      noteRateHold(freeAt)
      return false
    end
  end
  local limit = limitOf(limitsKey, 'wf:' .. workflow)
  return not limit or activeCount(wfKey(base, workflow, 'active')) < limit
end

-- Returns whether the group has room; when its rate limit is what holds it, also when that frees.
local function groupRoom(base, limitsKey, workflow, group)
  local lane = laneOf(base, workflow, group)
  if controlsOn(limitsKey) then
    if limitOf(limitsKey, 'wf:' .. workflow .. ':paused-groups') and limitOf(limitsKey, 'wf:' .. workflow .. ':g:' .. group .. ':paused') then
      return false
    end
    local max, perMs = groupRate(limitsKey, workflow, group)
    local freeAt = max and rateFreeAt(lane .. 'rate-log', max, perMs)
    if freeAt then return false, freeAt end
  end
  local limit = groupLimit(limitsKey, workflow, group)
  return not limit or activeCount(lane .. 'active') < limit
end

-- A group with due runs held back only by its rate limit waits in the workflow's `rate-held` zset
-- (score = when its window frees) for reserve to bring it back (promoteRateHeld): nothing else
-- would, since no run of it may finish or arrive meanwhile.
local function holdForRate(base, workflow, group, freeAt)
  redis.call('ZADD', wfKey(base, workflow, 'rate-held'), freeAt, group)
  noteRateHold(freeAt)
end

-- Turns of the group round-robin: increasing numbers, taken from the `turn` counter in blocks
-- so a call pays one INCRBY however many groups it moves.
local turnNext, turnLast = 1, 0
local function nextTurn(base)
  if turnNext > turnLast then
    turnLast = redis.call('INCRBY', base .. 'turn', 64)
    turnNext = turnLast - 63
  end
  turnNext = turnNext + 1
  return turnNext - 1
end

-- Puts a group in its workflow's round-robin of runnable groups (at the back) if it has due runs
-- and room under its cap; a group without either stays out, so claiming never visits it.
-- Returns true if the group was added.
local function activateGroup(base, limitsKey, seqKey, workflow, group)
  local readyKey = wfKey(base, workflow, 'ready')
  -- The common case, a group with a backlog, is in the round-robin already: one read.
  if redis.call('ZSCORE', readyKey, group) then return false end
  local lane = laneOf(base, workflow, group)
  if not laneHasDue(lane) then return false end
  local room, freeAt = groupRoom(base, limitsKey, workflow, group)
  if not room then
    if freeAt then holdForRate(base, workflow, group, freeAt) end
    return false
  end
  return redis.call('ZADD', readyKey, nextTurn(base), group) == 1
end

-- A rate limit raised or removed lets the groups it held back (in `rate-held`, each until its old
-- window frees) run at once. A review moves them all to the workflow's `rate-review` zset and
-- flags it in the limits hash ('wf:<name>:rate-review', which a reserve reads with its other
-- limits: a workflow without a review pays no command for it). Batches then take groups off
-- rate-review (see reviewRateHeld): set-control's own calls, and every reserve of the workflow's
-- workers while the flag is set, whatever the controls say. So a review whose caller stopped
-- part-way (it died, a reply was lost) still finishes, and each group is reviewed once under the
-- limit of the time: one still without room is held again in rate-held, not in rate-review.
local function startRateReview(base, limitsKey, workflow)
  local heldKey, reviewKey = wfKey(base, workflow, 'rate-held'), wfKey(base, workflow, 'rate-review')
  if redis.call('EXISTS', heldKey) == 0 then return end
  if redis.call('EXISTS', reviewKey) == 1 then
    -- A review still under way (two changes in a row): it takes these groups too.
    redis.call('ZUNIONSTORE', reviewKey, 2, reviewKey, heldKey, 'AGGREGATE', 'MIN')
    redis.call('DEL', heldKey)
  else
    redis.call('RENAME', heldKey, reviewKey)
  end
  local flag = 'wf:' .. workflow .. ':rate-review'
  redis.call('HSET', limitsKey, flag, 1)
  limitCache[flag] = 1
end

-- Takes up to `batch` groups off a review under way: each rejoins the round-robin if it has due
-- runs and room, or is held again by its limit. The batch that empties the review clears its
-- flag. Returns how many groups are left to review, and whether a group rejoined.
local function reviewRateHeld(base, limitsKey, seqKey, workflow, batch)
  local reviewKey = wfKey(base, workflow, 'rate-review')
  local joined = false
  local popped = redis.call('ZPOPMIN', reviewKey, batch)
  for i = 1, #popped, 2 do
    if activateGroup(base, limitsKey, seqKey, workflow, popped[i]) then joined = true end
  end
  local left = redis.call('ZCARD', reviewKey)
  if left == 0 then
    local flag = 'wf:' .. workflow .. ':rate-review'
    redis.call('HDEL', limitsKey, flag)
    limitCache[flag] = false
  end
  return left, joined
end

-- Writes a new run record (enqueue, or a schedule's fire) and returns its token base. Lease
-- tokens count up from a base unique to this incarnation of the id (its creation time, in
-- µs-sized steps), so a worker stuck on an expired run of the same id holds no valid token.
-- `tag`/`tagValue`: one more field, where the run came from ('nonce' of its enqueue call, or
-- 'schedule' that fired it).
local function storeRun(runKey, workflow, input, state, priority, maxAttempts, group, now, due, tag, tagValue, compact)
  local tokenBase = now * 1000
  -- Text for the common case (stored at the call's time): no number formatting per run.
  local token, created
  if now == nowMs() then token, created = nowText() .. '000', nowText() else token, created = string.format('%.0f', tokenBase), now end
  if due == now then due = created end
  if compact then
    -- The compact record leaves out what a reader defaults: attempts, failures and stalls 0, and
    -- priority 0 (every reader of this version defaults them; older versions need them: README, Migrations).
    redis.call('HSET', runKey, 'workflow', workflow, 'input', input, 'state', state, 'maxAttempts', maxAttempts,
      'token', token, 'createdAt', created, 'dueAt', due, tag, tagValue)
    if tonumber(priority) ~= 0 then redis.call('HSET', runKey, 'priority', priority) end
  else
    redis.call('HSET', runKey, 'workflow', workflow, 'input', input, 'state', state, 'priority', priority,
      'maxAttempts', maxAttempts, 'attempts', '0', 'failures', '0', 'stalls', '0', 'token', token,
      'createdAt', created, 'dueAt', due, tag, tagValue)
  end
  if group ~= '' then redis.call('HSET', runKey, 'group', group) end
  return tokenBase
end

-- Makes a run due (see pushDue) and announces it to its workflow's workers. A group is listed
-- in its workflow's `groups` set while it has due or active runs (for stats and cap changes).
-- The stats field 'groupDue' counts the runs due in group lanes, so stats reads one number
-- instead of visiting every group; the claim pass takes its pops off (see settleGroups).
local function makeDue(base, limitsKey, seqKey, workflow, group, id, priority, front)
  pushDue(laneOf(base, workflow, group), seqKey, id, priority, front)
  if group and group ~= '' then
    redis.call('HINCRBY', wfKey(base, workflow, 'stats'), 'groupDue', 1)
    redis.call('SADD', wfKey(base, workflow, 'groups'), group)
    activateGroup(base, limitsKey, seqKey, workflow, group)
  end
  wake(wfKey(base, workflow, 'wake'))
end

-- Puts a run in its workflow's delayed set, due at `dueAt` (the caller has set its state), and
-- wakes a worker if it is now the earliest: a blocked worker sleeps until the earliest is due.
-- `earliest` is the set's first entry WITHSCORES, read by the caller before its first write.
local function addDelayed(base, workflow, id, dueAt, earliest)
  redis.call('ZADD', wfKey(base, workflow, 'delayed'), dueAt, id)
  if #earliest == 0 or tonumber(earliest[2]) > dueAt then wake(wfKey(base, workflow, 'wake')) end
end

-- Returns the run's workflow and group if `token` holds its lease, else nil. A stale worker
-- changes nothing.
-- Also returns whether someone waits on the run and whether it is linked (see finishRun).
local function leasedRun(runKey, token)
  local f = redis.call('HMGET', runKey, 'state', 'token', 'workflow', 'group', 'waited', 'links')
  if f[1] == 'active' and f[2] == token then return f[3], f[4] or '', f[5] == '1', f[6] == '1' end
  return nil
end

-- Whether a workflow has due runs in any lane.
local function hasDue(base, workflow)
  return laneHasDue(laneOf(base, workflow, '')) or redis.call('ZCARD', wfKey(base, workflow, 'ready')) > 0
end

-- Frees the slots a run holds at every level, and notes in `freed` (workflow -> true, or
-- 'rejoined' when a group its cap held back rejoined the round-robin) what wakeCapped must
-- look at. Callers that refill slots themselves call wakeCapped after refilling.
-- After a slot of a group freed: the group rejoins the round-robin if it can run again, or, if
-- it is idle now, leaves the workflow's list of groups and costs nothing. Returns true if it
-- rejoined.
local function reviewGroup(base, limitsKey, seqKey, workflow, group)
  if activateGroup(base, limitsKey, seqKey, workflow, group) then return true end
  local lane = laneOf(base, workflow, group)
  if not laneHasDue(lane) and activeCount(lane .. 'active') == 0 then
    redis.call('SREM', wfKey(base, workflow, 'groups'), group)
  end
  return false
end

-- Groups whose slots freed in a call that claims right after (complete sets it to a table):
-- their review waits for the claim, which may fill the slot again at once — sparing the group a
-- trip out of the round-robin and back (see settleGroups).
local deferredGroups = nil

local function releaseSlots(base, leasesKey, limitsKey, seqKey, id, workflow, group, freed)
  removeActive(leasesKey, id)
  removeActive(wfKey(base, workflow, 'active'), id)
  if freed[workflow] == nil then freed[workflow] = true end
  if group ~= '' then
    removeActive(laneOf(base, workflow, group) .. 'active', id)
    if deferredGroups then
      deferredGroups[workflow] = deferredGroups[workflow] or {}
      deferredGroups[workflow][group] = true
    elseif reviewGroup(base, limitsKey, seqKey, workflow, group) then
      freed[workflow] = 'rejoined'
    end
  end
end

-- Workflows whose due runs the namespace cap held back: `ns-waiting`, a zset scored by turn
-- (oldest first), written by a claim pass that found the cap full (see claimRuns). A call that
-- leaves room under the cap takes up to that many of them off it (at most NS_WAKE_BATCH) and
-- wakes their workers; each woken worker claims what it can, notes its workflow again if the cap
-- is full once more, and passes the room left on the same way (reserve). So a finishing call
-- costs a few commands however many workflows the namespace has, and a run the namespace cap
-- held back is not stranded: its workflow is in ns-waiting or its wake list has a marker.
local NS_WAKE_BATCH = 8
local function wakeNamespaceWaiters(base, limitsKey)
  local limit = limitOf(limitsKey, 'ns')
  if not limit then return end
  local room = limit - activeCount(KEYS_LEASES)
  if room <= 0 then return end
  local popped = redis.call('ZPOPMIN', base .. 'ns-waiting', math.min(room, NS_WAKE_BATCH))
  for i = 1, #popped, 2 do
    if hasDue(base, popped[i]) then wake(wfKey(base, popped[i], 'wake')) end
  end
end

-- Wakes the workers a full cap may have left blocked although runs are due: those of the
-- workflows in `freed` that are capped or had a group rejoin, and those the namespace cap held
-- back (wakeNamespaceWaiters). Uncapped levels never leave a worker blocked with work due.
local function wakeCapped(base, limitsKey, freed)
  wakeNamespaceWaiters(base, limitsKey)
  for wf, how in pairs(freed) do
    if (how == 'rejoined' or limitOf(limitsKey, 'wf:' .. wf)) and hasDue(base, wf) then
      wake(wfKey(base, wf, 'wake'))
    end
  end
end

-- Publishes on one of the namespace's channels. On a Redis Cluster they are sharded channels
-- (SPUBLISH: the channel lives in the namespace's slot, so only its shard carries the message,
-- where PUBLISH would copy it to every node); subscribers match (lib/redis/pubsub.channels.ts).
-- The caller says which: the last slot-guard key, always the last key, is `slot-guard:sharded`
-- on a cluster (RedisKeys.slotGuard).
local function publish(channel, message)
  if string.sub(KEYS[#KEYS], -8) == ':sharded' then
    return redis.call('SPUBLISH', channel, message)
  end
  return redis.call('PUBLISH', channel, message)
end

-- Set by lua/includes/waits.lua, which every script that finishes runs includes: delivers a
-- child run's outcome to its parent (see finishRun).
local onChildFinished

-- Bytes of a journal per hash field: under Redis's hash-max-listpack-value (64), so a run's hash
-- keeps its compact encoding (one 119-byte field made it a hashtable: 424 -> 1,440 bytes a run).
local JOURNAL_CHUNK = 60

-- Writes fields of a run's hash and, when given, the committing attempt's journal ('<slot>
-- <json>', see lib/worker/attempt.journal.ts) as fields 'tl:<slot>' (the chunk count) and
-- 'tl:<slot>.<k>' (its chunks): one HSET either way, so the dashboard's step timeline costs no
-- command of its own. Chunks a longer journal left in a reused slot are never read (the count says).
local function hsetRun(runKey, journal, ...)
  local space = journal and string.find(journal, ' ', 1, true)
  if not space then return redis.call('HSET', runKey, ...) end
  local slot = 'tl:' .. string.sub(journal, 1, space - 1)
  local args = { slot, 0 }
  local chunks = 0
  for i = space + 1, #journal, JOURNAL_CHUNK do
    args[#args + 1] = slot .. '.' .. chunks
    args[#args + 1] = string.sub(journal, i, i + JOURNAL_CHUNK - 1)
    chunks = chunks + 1
  end
  args[2] = chunks
  for _, value in ipairs({ ... }) do args[#args + 1] = value end
  return redis.call('HSET', runKey, unpack(args))
end

-- Records a final state and starts the retention clock. If someone waits on the run (`waited`,
-- set by run() at enqueue or by wait() through watch.lua), announces it on the run's done
-- channel; the announcement carries the outcome itself (`field` is 'result' or 'error',
-- `payload` already JSON) so the waiter needs no further read. The stored record stays the truth;
-- a run nobody waits on costs no publish. A `linked` run (field 'links': it is a child workflow,
-- or signals wait in its mailbox; see waits.lua) also resumes its parent and drops its mailbox:
-- the common run pays nothing for either. `journal`: the attempt's, stored with the outcome.
local function finishRun(base, runKey, id, workflow, state, field, payload, now, ttlMs, waited, linked, journal)
  hsetRun(runKey, journal, 'state', state, field, payload, 'finishedAt', now)
  redis.call('PEXPIRE', runKey, ttlMs)
  if linked then
    redis.call('DEL', base .. 'mailbox:' .. id)
    local parent = redis.call('HGET', runKey, 'parent')
    if parent then
      if not onChildFinished then error('finishRun: a script that finishes runs must include waits') end
      onChildFinished(base, parent, state, payload)
    end
  end
  if not waited then return end
  local body = payload
  if body == '' then body = 'null' end
  publish(base .. 'done:' .. id,
    '{"v":1,"state":"' .. state .. '","workflow":"' .. workflow .. '","' .. field .. '":' .. body
      .. ',"undef":' .. (payload == '' and 'true' or 'false') .. '}')
end

-- Finish indexes: per workflow, one zset per final state (wf:<name>:completed, :failed,
-- :cancelled), member = run id, score = finish order: max(the index's last score + 1, now * 1024).
-- Strict even for runs finishing in the same millisecond, and about the finish time, so
-- retention trims by score. listRuns pages by score.
local FINISH_SCALE = 1024
-- How many finishes of a state pass between two looks for expired index entries.
local TRIM_EVERY = 64

-- Runs `command key item…` in chunks of `per` items: Lua's unpack is bounded.
local function callChunked(command, key, items, per)
  for i = 1, #items, per do
    redis.call(command, key, unpack(items, i, math.min(i + per - 1, #items)))
  end
end

-- Adds one finished run to a per-call tally (in finish order), written once per workflow by
-- countFinished.
local function tallyFinished(tally, workflow, state, id)
  local runs = tally[workflow]
  if not runs then
    runs = { states = {}, ids = {} }
    tally[workflow] = runs
  end
  runs.states[#runs.states + 1] = state
  runs.ids[#runs.ids + 1] = id
end

-- Index entries older than the retention point at run hashes that expired: dropped, at most
-- `budget` a call (an index never holds more than a few calls' worth of them). A run finished
-- at t has score >= t * 1024, so a score below (now - ttl) * 1024 proves its hash is gone.
local function trimExpired(indexKey, now, ttlMs, budget)
  local cutoff = string.format('%.0f', (now - ttlMs) * FINISH_SCALE)
  local old = redis.call('ZRANGEBYSCORE', indexKey, '-inf', '(' .. cutoff, 'LIMIT', 0, budget)
  if #old > 0 then callChunked('ZREM', indexKey, old, 500) end
end

-- Retention by count: the oldest runs past the newest `keep` are deleted with their entries,
-- at most `budget` a call. An entry whose run is not in that state any more (its hash expired
-- and the id was enqueued again) loses only its entry: the new run is not this index's.
local function trimToKeep(base, workflow, indexKey, state, keep, budget)
  local excess = redis.call('ZCARD', indexKey) - keep
  if excess <= 0 then return end
  local n = math.min(excess, budget)
  local doomed = {}
  for _, id in ipairs(redis.call('ZRANGE', indexKey, 0, n - 1)) do
    local runKey = base .. 'run:' .. id
    local f = redis.call('HMGET', runKey, 'state', 'workflow')
    if f[1] == state and f[2] == workflow then doomed[#doomed + 1] = runKey end
  end
  redis.call('ZREMRANGEBYRANK', indexKey, 0, n - 1)
  for i = 1, #doomed, 500 do redis.call('DEL', unpack(doomed, i, math.min(i + 499, #doomed))) end
end

-- Writes a call's tally: per workflow, the running totals, one sequence read and write, the
-- index entries (one ZADD per state), then the bounded trims (retention by time, then by count:
-- `wf:<name>:keep:<state>` in the limits hash, completed and failed only). Call it after the
-- call's last write to a finished run's hash: a count of 0 deletes the hash here.
local function countFinished(base, limitsKey, tally, now, ttlMs)
  for workflow, runs in pairs(tally) do
    local statsKey = wfKey(base, workflow, 'stats')
    -- Trim by the longest retention any process finishing this workflow's runs uses: an entry is
    -- dropped only once no record it can point at is left. Kept in the limits hash, so a
    -- claiming call reads it with its other limits (see primeLimits), written only when it grows.
    local ttlField = 'wf:' .. workflow .. ':ttl-max'
    local ttlMax = limitOf(limitsKey, ttlField) or 0
    if ttlMs > ttlMax then
      ttlMax = ttlMs
      redis.call('HSET', limitsKey, ttlField, ttlMax)
      limitCache[ttlField] = ttlMax
    end
    local byState, states = {}, {}
    for i, state in ipairs(runs.states) do
      local ids = byState[state]
      if not ids then
        ids = {}
        byState[state] = ids
        states[#states + 1] = state
      end
      ids[#ids + 1] = runs.ids[i]
    end
    for _, state in ipairs(states) do
      local ids = byState[state]
      local added = #ids
      local total = redis.call('HINCRBY', statsKey, state, added)
      local indexKey = wfKey(base, workflow, state)
      -- Completed runs are indexed only where asked for (@Workflow indexCompleted, or keep.completed),
      -- or while a dashboard is open ('completed-watch': until when, in ms, renewed by the page's
      -- reads): the one finish every run has, so the index costs the hot path only when used.
      if state ~= 'completed' or limitOf(limitsKey, 'wf:' .. workflow .. ':index-completed')
          or (limitOf(limitsKey, 'completed-watch') or 0) > now then
        -- Strict finish order: after the index's last entry, and about the finish time.
        local last = redis.call('ZRANGE', indexKey, -1, -1, 'WITHSCORES')
        local score = math.max(#last > 0 and tonumber(last[2]) + 1 or 0, now * FINISH_SCALE)
        local members = {}
        for k, id in ipairs(ids) do
          members[2 * k - 1] = string.format('%.0f', score + k - 1)
          members[2 * k] = id
        end
        callChunked('ZADD', indexKey, members, 1000)
        local budget = 2 * added + 64
        -- Expired entries: looked for once per TRIM_EVERY finishes of the state (the running total
        -- crossing a multiple), with room for all that can have expired since.
        if math.floor(total / TRIM_EVERY) ~= math.floor((total - added) / TRIM_EVERY) then
          trimExpired(indexKey, now, ttlMax, 4 * TRIM_EVERY + budget)
        end
        if state ~= 'cancelled' then
          local keep = limitOf(limitsKey, 'wf:' .. workflow .. ':keep:' .. state)
          if keep then trimToKeep(base, workflow, indexKey, state, keep, budget) end
        end
      end
    end
  end
end

-- Counts the runs due in every group lane of a workflow and stores the sum as the exact
-- 'groupDue' (see makeDue): the one pass over a workflow's groups, for a count that is missing
-- (data from before it existed) or was disturbed. Returns the sum.
local function recountGroupDue(base, workflow)
  local sum = 0
  for _, group in ipairs(redis.call('SMEMBERS', wfKey(base, workflow, 'groups'))) do
    sum = sum + dueCount(laneOf(base, workflow, group))
  end
  redis.call('HSET', wfKey(base, workflow, 'stats'), 'groupDue', sum, 'groupDueExact', 1)
  return sum
end

-- Groups one call brings back after a change of every group's default cap. A workflow may have
-- any number of groups; a call visiting all of them would block Redis for as long, so the caller
-- goes through them in batches (see activate-groups).
local GROUP_BATCH = 500

-- Visits one batch of a workflow's groups from an SSCAN cursor of its `groups` set: each that
-- has due runs and room now rejoins the round-robin. SSCAN returns about GROUP_BATCH groups
-- (all of them while the set is small) and, across calls, every group present from the first
-- call to the last; a group added in between joined when it did (makeDue). Returns the next
-- cursor, '0' when every group was visited, and whether a group rejoined.
local function activateGroupBatch(base, limitsKey, seqKey, workflow, cursor)
  local page = redis.call('SSCAN', wfKey(base, workflow, 'groups'), cursor, 'COUNT', GROUP_BATCH)
  local joined = false
  for _, group in ipairs(page[2]) do
    if activateGroup(base, limitsKey, seqKey, workflow, group) then joined = true end
  end
  return page[1], joined
end

-- After a cap changed (at runtime or by a bootstrap): a group it held back rejoins its
-- workflow's round-robin, and the workers concerned are woken. `workflow` '' means every
-- registered workflow; `group` '' no group, '*' every group of the workflow: those are left to
-- the caller's batches (activateGroupBatch), as no call visits every group.
local function afterCapChange(base, limitsKey, seqKey, workflow, group)
  local workflows = { workflow }
  if workflow == '' then workflows = redis.call('SMEMBERS', base .. 'workflows') end
  for _, wf in ipairs(workflows) do
    if group ~= '' and group ~= '*' then activateGroup(base, limitsKey, seqKey, wf, group) end
    if hasDue(base, wf) then wake(wfKey(base, wf, 'wake')) end
  end
end
