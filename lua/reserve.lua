--[[
  reserve: one call per worker wake. Promotes due delayed runs (bounded), recovers stalled runs
  (at most once per interval fleet-wide), then claims up to ARGV[2] due runs round-robin over the
  worker's workflows, each under its workflow's fleet-wide cap read from `limits` (see claim.lua). Each claim
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
  ARGV[8..] workflow names this worker runs (rotated by the caller, so no workflow always goes first)
  Reply: { ms until the next delayed run or -1, claims... } where a claim is
         { id, workflow, token, attempt, failures, encoded input, { step, value, step, value… } }
]]
-- @include common
-- @include claim

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
    local f = redis.call('HMGET', runKey, 'workflow', 'priority', 'state', 'token', 'input')
    if f[1] and f[3] == 'active' then
      releaseSlot(base, KEYS[2], KEYS[3], id, f[1], true)
      -- A fast-path handoff no worker took must not be taken after all, with a dead token.
      local wakeKey = base .. 'wf:' .. f[1] .. ':wake'
      if redis.call('LLEN', wakeKey) > 0 then redis.call('LREM', wakeKey, 1, handoffEntry(f[4], id, f[5])) end
      local stalls = redis.call('HINCRBY', runKey, 'stalls', 1)
      if stalls > tonumber(ARGV[5]) then
        finishRun(base, runKey, base .. 'steps:' .. id, id, f[1], 'failed', 'error',
          '{"name":"StalledError","message":"lease expired ' .. stalls .. ' times (worker died or blocked the event loop)"}',
          now, tonumber(ARGV[7]))
      else
        requeue(base, runKey, id, f[1], f[2])
      end
    else
      redis.call('ZREM', KEYS[2], id)
    end
  end
end

-- 3. Claim.
local reply = { -1 }
claimRuns(base, KEYS[2], KEYS[3], workflows, maxClaims, now, lockMs, reply, true)

local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #head > 0 then reply[1] = math.max(0, tonumber(head[2]) - now) end
return reply
