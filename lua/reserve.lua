--[[
  reserve: one call per worker wake. Promotes due delayed runs (bounded), recovers stalled runs
  (at most once per interval fleet-wide), then claims up to ARGV[2] due runs round-robin over the
  worker's workflows, each under its workflow's fleet-wide cap read from `limits`. Each claim
  carries the run's step memo, so step reads during the run cost no round trip.

  KEYS[1] delayed     zset
  KEYS[2] leases      zset
  KEYS[3] limits      hash
  KEYS[4] seq         string
  KEYS[5] stall-gate  string
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] max runs to claim (0 = only promote and scan)
  ARGV[3] lease length in ms
  ARGV[4] stalled-scan interval in ms, or 0 to skip the scan this time
  ARGV[5] stalls a run may have before it fails for good
  ARGV[6] max delayed runs to promote
  ARGV[7] retention in ms of a run failed by the stall limit
  ARGV[8..] workflow names this worker runs
  Reply: { ms until the next delayed run or -1, claims... } where a claim is
         { id, workflow, token, attempt, failures, encoded input, { step, value, step, value… } }
]]
-- @include common

local base = ARGV[1]
local maxClaims = tonumber(ARGV[2])
local lockMs = tonumber(ARGV[3])
local now = nowMs()

local mine = {}
local workflows = {}
for i = 8, #ARGV do
  workflows[#workflows + 1] = ARGV[i]
  mine[ARGV[i]] = true
end

-- 1. Promote due delayed runs of any workflow; wake other workflows' workers, ours claim below.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[6]))
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  local runKey = base .. 'run:' .. id
  local f = redis.call('HMGET', runKey, 'workflow', 'priority', 'state')
  if f[1] and f[3] == 'delayed' then
    redis.call('HSET', runKey, 'state', 'waiting')
    redis.call('ZADD', base .. 'wf:' .. f[1] .. ':waiting', waitingScore(KEYS[4], f[2]), id)
    if not mine[f[1]] then wake(base .. 'wf:' .. f[1] .. ':wake') end
  end
end

-- 2. Stalled runs: their lease ran out without a heartbeat (the worker died or hung).
local scanInterval = tonumber(ARGV[4])
if scanInterval > 0 and redis.call('SET', KEYS[5], '1', 'NX', 'PX', scanInterval) then
  local stalled = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 100)
  for _, id in ipairs(stalled) do
    local runKey = base .. 'run:' .. id
    local f = redis.call('HMGET', runKey, 'workflow', 'priority', 'state')
    if f[1] and f[3] == 'active' then
      releaseSlot(base, KEYS[2], KEYS[3], id, f[1])
      local stalls = redis.call('HINCRBY', runKey, 'stalls', 1)
      if stalls > tonumber(ARGV[5]) then
        finishRun(base, runKey, base .. 'steps:' .. id, id, 'failed', 'error',
          '{"name":"StalledError","message":"lease expired ' .. stalls .. ' times (worker died or blocked the event loop)"}',
          now, tonumber(ARGV[7]))
      else
        requeue(base, KEYS[4], runKey, id, f[1], f[2])
      end
    else
      redis.call('ZREM', KEYS[2], id)
    end
  end
end

-- 3. Claim round-robin over our workflows, one run per workflow per pass, under each cap.
local reply = { -1 }
local claimed = 0
local open = {}
for i, wf in ipairs(workflows) do open[i] = true end

local function room(wf)
  local limit = redis.call('HGET', KEYS[3], 'wf:' .. wf)
  if not limit then return true end
  return redis.call('SCARD', base .. 'wf:' .. wf .. ':active') < tonumber(limit)
end

local progress = true
while progress and claimed < maxClaims do
  progress = false
  for i, wf in ipairs(workflows) do
    if open[i] and claimed < maxClaims then
      if not room(wf) then
        open[i] = false
      else
        local popped = redis.call('ZPOPMIN', base .. 'wf:' .. wf .. ':waiting')
        if #popped == 0 then
          open[i] = false
        else
          local id = popped[1]
          local runKey = base .. 'run:' .. id
          local f = redis.call('HMGET', runKey, 'token', 'attempts', 'failures', 'input')
          if f[1] then
            local token = tostring(tonumber(f[1]) + 1)
            local attempt = tonumber(f[2]) + 1
            redis.call('HSET', runKey, 'state', 'active', 'token', token, 'attempts', attempt, 'startedAt', now)
            redis.call('SADD', base .. 'wf:' .. wf .. ':active', id)
            redis.call('ZADD', KEYS[2], now + lockMs, id)
            reply[#reply + 1] = { id, wf, token, attempt, tonumber(f[3]), f[4],
              redis.call('HGETALL', base .. 'steps:' .. id) }
            claimed = claimed + 1
          end
          progress = true
        end
      end
    end
  end
end

-- 4. We filled our batch but work is left that a cap allows: pass the wake marker on.
if claimed >= maxClaims and maxClaims > 0 then
  for i, wf in ipairs(workflows) do
    if open[i] and redis.call('ZCARD', base .. 'wf:' .. wf .. ':waiting') > 0 and room(wf) then
      wake(base .. 'wf:' .. wf .. ':wake')
    end
  end
end

local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #head > 0 then reply[1] = math.max(0, tonumber(head[2]) - now) end
return reply
