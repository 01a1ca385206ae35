-- Shared helpers, inlined into every script by the loader (`-- @include common`).

-- Milliseconds from the Redis clock: workers' clocks may be skewed, the server's is the one truth.
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Waiting score: higher priority first, FIFO within a priority. Priority takes the top 20 bits,
-- a namespace sequence the low 32, which keeps the score an exact integer in a double (< 2^53).
-- Formatted with %.0f because tostring() would round it to 14 significant digits.
local MAX_PRIORITY = 1048575
local function waitingScore(seqKey, priority)
  local seq = redis.call('INCR', seqKey) % 4294967296
  return string.format('%.0f', (MAX_PRIORITY - tonumber(priority)) * 4294967296 + seq)
end

-- A wake list ends in at most one marker: one blocked worker wakes, claims what it can, and
-- passes the marker on if work is left (see reserve). Fast-path handoffs may sit before it; a
-- marker goes after them, so the worker that takes a handoff also learns of the queued runs.
local function wake(wakeKey)
  if redis.call('LINDEX', wakeKey, -1) ~= '1' then
    redis.call('RPUSH', wakeKey, '1')
  end
end

-- A wake list entry other than the '1' marker is a handoff: a run the enqueue fast path already
-- claimed, ready to execute, as '<token> <id> <input>' (tokens and ids contain no spaces).
local function handoffEntry(token, id, input)
  return token .. ' ' .. id .. ' ' .. input
end

-- Returns the run's workflow if `token` holds its lease, else nil. A stale worker changes nothing.
local function leasedWorkflow(runKey, token)
  local f = redis.call('HMGET', runKey, 'state', 'token', 'workflow')
  if f[1] == 'active' and f[2] == token then return f[3] end
  return nil
end

-- A workflow's fleet-wide cap, or false. Caps cannot change during one script call, so each is
-- read once per call however many runs the call handles.
local limitCache = {}
local function limitOf(limitsKey, workflow)
  local limit = limitCache[workflow]
  if limit == nil then
    limit = redis.call('HGET', limitsKey, 'wf:' .. workflow)
    if limit then limit = tonumber(limit) end
    limitCache[workflow] = limit
  end
  return limit
end

-- Lets a worker blocked on a full cap know there is room again. Uncapped workflows never block
-- on a cap, so they need no wake here.
local function wakeIfRoom(base, limitsKey, workflow)
  local limit = limitOf(limitsKey, workflow)
  if limit and redis.call('SCARD', base .. 'wf:' .. workflow .. ':active') < limit
    and redis.call('ZCARD', base .. 'wf:' .. workflow .. ':waiting') > 0 then
    wake(base .. 'wf:' .. workflow .. ':wake')
  end
end

-- Frees the slot a run holds. With `wakeNow`, wakes a worker if a cap was holding runs back;
-- a caller that refills the slot itself first passes false and calls wakeIfRoom afterwards.
local function releaseSlot(base, leasesKey, limitsKey, id, workflow, wakeNow)
  redis.call('ZREM', leasesKey, id)
  if redis.call('SREM', base .. 'wf:' .. workflow .. ':active', id) == 1 and wakeNow then
    wakeIfRoom(base, limitsKey, workflow)
  end
end

-- Puts a started run (stalled, or handed back at shutdown) back among the due runs of its
-- workflow, at the front of its priority: it was due before anything queued behind it.
local function requeue(base, runKey, id, workflow, priority)
  redis.call('HSET', runKey, 'state', 'waiting')
  redis.call('ZADD', base .. 'wf:' .. workflow .. ':waiting',
    string.format('%.0f', (MAX_PRIORITY - tonumber(priority or 0)) * 4294967296), id)
  wake(base .. 'wf:' .. workflow .. ':wake')
end

-- Records a final state, starts the retention clock (of the step memo too, unless the caller
-- knows there is none: stepsKey false) and announces it. The announcement carries the outcome
-- itself (`field` is 'result' or 'error', `payload` already JSON) so waiters need no further
-- read; the stored record stays the truth.
local function finishRun(base, runKey, stepsKey, id, workflow, state, field, payload, now, ttlMs)
  redis.call('HSET', runKey, 'state', state, field, payload, 'finishedAt', now)
  redis.call('PEXPIRE', runKey, ttlMs)
  if stepsKey then redis.call('PEXPIRE', stepsKey, ttlMs) end
  local body = payload
  if body == '' then body = 'null' end
  redis.call('PUBLISH', base .. 'done:' .. id,
    '{"v":1,"state":"' .. state .. '","workflow":"' .. workflow .. '","' .. field .. '":' .. body
      .. ',"undef":' .. (payload == '' and 'true' or 'false') .. '}')
end
