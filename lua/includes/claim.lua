-- claim: taking the lease of one due run and the reply row its worker gets; replaying a claiming
-- call whose reply was lost; taking the enqueue fast path's handoffs (`-- @include claim`).
-- Shared by reserve (a worker's wake) and complete (the slots finished runs free are refilled in
-- the same call).
-- @needs time, util, lanes, leases, records, waits
--
-- Bytes of inputs and memos in this call's reply so far: claiming stops once past the budget, so
-- one reply stays bounded however large runs' memos grow (each memo is bounded on its own by the
-- worker's maxRunMemoBytes).

local replyBytes = 0
local MAX_REPLY_BYTES = 8 * 1024 * 1024

-- Telemetry extras, asked for by a worker with OpenTelemetry on (the calling script sets this
-- from its flags argument): each claim then also carries the run's stored trace context ('' for
-- none; see enqueue.lua) and how long it waited between becoming due and this claim in ms (-1
-- when the record cannot tell). Without them a claim carries neither.
local withExtras = false

-- This call's claims: how many, and 'id token' of each (for rememberClaims); none is nil.
local claimCount = 0
local claimParts = nil

-- Appends one claim to the script's reply, flat (Redis converts every table of a reply with a
-- handful of field lookups, so a claim as a row with a memo table cost two conversions, most of
-- what its reply cost): id, workflow, token, attempt, failures, input, its own time limit ('' for
-- none: the workflow's applies; see enqueue.lua), group ('' for none), the memo's length, the
-- memo as step, value, …, then with the extras trace and waitMs (lib/redis/commands/claim.reply.ts
-- reads it). A first attempt has no memo (it is not read). A run that continued as new
-- (continue.lua) has its incarnation, `gen`, as a first pseudo-entry '~gen' (no memo key has a
-- '~'), so the worker tells its children's ids from an earlier incarnation's.
local function appendClaim(reply, runKey, id, workflow, token, attempt, failures, input, timeoutMs, group, gen, trace, waitMs)
  local n = #reply
  reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4], reply[n + 5] = id, workflow, token, attempt, failures
  reply[n + 6], reply[n + 7], reply[n + 8] = input, timeoutMs or '', group or ''
  local lengthAt = n + 9
  n = lengthAt
  replyBytes = replyBytes + #input
  if gen then
    reply[n + 1], reply[n + 2] = '~gen', gen
    n = n + 2
    replyBytes = replyBytes + 4 + #gen
  end
  if attempt > 1 then
    local fields = redis.call('HGETALL', runKey)
    for i = 1, #fields, 2 do
      if string.sub(fields[i], 1, 5) == 'step:' then
        reply[n + 1], reply[n + 2] = string.sub(fields[i], 6), fields[i + 1]
        n = n + 2
        replyBytes = replyBytes + #fields[i] + #fields[i + 1]
      end
    end
  end
  reply[lengthAt] = n - lengthAt
  if withExtras then
    reply[n + 1], reply[n + 2] = trace or '', waitMs
    replyBytes = replyBytes + #reply[n + 1]
  end
  claimCount = claimCount + 1
  claimParts = claimParts or {}
  claimParts[claimCount] = id .. ' ' .. token
end

-- Takes the lease of a due run popped from a lane: the writes every claim makes, whatever path,
-- and the claim appended to `reply` (see appendClaim). An id without a record (it expired, or was
-- written under another key prefix) is not dropped silently: it goes to the `orphans` list (the
-- latest 1,000).
local function claimRun(base, leasesKey, id, workflow, group, now, lockMs, reply)
  local runKey = base .. 'run:' .. id
  local f
  if withExtras then
    f = redis.call('HMGET', runKey, 'token', 'attempts', 'failures', 'input', 'timeoutMs', 'wait', 'gen', 'createdAt', 'trace', 'dueAt')
  else
    f = redis.call('HMGET', runKey, 'token', 'attempts', 'failures', 'input', 'timeoutMs', 'wait', 'gen', 'createdAt')
  end
  -- Every record has its input; a lean one (see storeRun) has no token before its first claim.
  if not f[4] then
    redis.call('LPUSH', base .. 'orphans', workflow .. ' ' .. id)
    redis.call('LTRIM', base .. 'orphans', 0, 999)
    return false
  end
  -- A durable wait that came due by its deadline but was promoted by an older version, which
  -- leaves the wait recorded (reserve ends it as it promotes; see waits.lua): its outcome joins
  -- the memo below.
  if f[6] then endWaitByTime(base, runKey, id, workflow, f[6]) end
  local token = intText((tonumber(f[1]) or (createdOf(id, f[8]) or now) * 1000) + 1)
  -- A lean run record (see storeRun) omits attempts and failures while they are 0.
  local attempts, failures = tonumber(f[2]) or 0, tonumber(f[3]) or 0
  local attempt = attempts + 1
  redis.call('HSET', runKey, 'state', 'active', 'token', token, 'attempts', intText(attempt), 'startedAt', intText(now))
  addActive(wfKey(base, workflow, 'active'), id)
  if group ~= '' then addActive(laneOf(base, workflow, group) .. 'active', id) end
  addActive(leasesKey, id, now + lockMs)
  local waitMs = -1
  if withExtras then
    -- `dueAt` is when the run last became due only if every earlier attempt failed (fail.lua
    -- sets it for the retry); a stall recovery or a hand-back makes the run due again without
    -- recording when, so its wait is unknown.
    local dueAt = tonumber(f[10]) or createdOf(id, f[8])
    if dueAt and attempts == failures then waitMs = math.max(0, now - dueAt) end
  end
  appendClaim(reply, runKey, id, workflow, token, attempt, failures, f[4], f[5], group, f[7], f[9], waitMs)
  return true
end

-- A claiming call (reserve, or complete's refill) whose reply was lost is sent again with the same
-- call key. The first execution left its claims there as 'id token id token …': if the key
-- exists, this is the retry, and it hands those claims back (those still held by their token,
-- leases renewed) instead of claiming again. Returns true if it replayed.
local function replayClaims(base, leasesKey, callKey, now, lockMs, reply)
  local stored = redis.call('GET', callKey)
  if not stored then return false end
  for id, token in string.gmatch(stored, '(%S+) (%S+)') do
    local runKey = base .. 'run:' .. id
    local f = redis.call('HMGET', runKey, 'state', 'token', 'workflow', 'attempts', 'failures', 'input', 'trace', 'group', 'timeoutMs', 'gen')
    if f[1] == 'active' and f[2] == token then
      redis.call('ZADD', leasesKey, 'XX', intText(now + lockMs), id)
      -- The wait was the first execution's to report: unknown here.
      appendClaim(reply, runKey, id, f[3], token, tonumber(f[4]), tonumber(f[5]) or 0, f[6], f[9], f[8], f[10], f[7], -1)
    end
  end
  return true
end

-- Keeps this call's claims under the call key for a retry (see replayClaims), for one lease
-- length: a claim older than that has been recovered by the stalled scan anyway.
local function rememberClaims(callKey, ttlMs)
  if claimCount == 0 then return end
  redis.call('SET', callKey, table.concat(claimParts, ' '), 'PX', ttlMs)
end

-- A run the enqueue fast path handed off is older than anything due: take it first. Its lease
-- now runs on this worker's clock. Returns true if one was taken.
local function takeHandoff(base, leasesKey, workflow, now, lockMs, reply)
  local wakeKey = wfKey(base, workflow, 'wake')
  local entry = redis.call('LINDEX', wakeKey, 0)
  if not entry or entry == '1' then return false end
  redis.call('LPOP', wakeKey)
  local s1 = string.find(entry, ' ', 1, true)
  local s2 = string.find(entry, ' ', s1 + 1, true)
  local token, id = string.sub(entry, 1, s1 - 1), string.sub(entry, s1 + 1, s2 - 1)
  local leased, group = leasedRun(base .. 'run:' .. id, token)
  if not leased then return false end
  redis.call('ZADD', leasesKey, intText(now + lockMs), id)
  local trace, waitMs = nil, -1
  if withExtras then
    -- Claimed by its enqueue, due then: the wait is the time it sat in the wake list.
    local f = redis.call('HMGET', base .. 'run:' .. id, 'trace', 'dueAt', 'createdAt')
    local dueAt = tonumber(f[2]) or createdOf(id, f[3])
    trace, waitMs = f[1], dueAt and math.max(0, now - dueAt) or -1
  end
  -- A run with its own time limit is never handed off (see enqueue.lua): '' for none.
  appendClaim(reply, nil, id, workflow, token, 1, 0, string.sub(entry, s2 + 1), '', group, nil, trace, waitMs)
  return true
end
