--[[
  fail: record a failed attempt, if the caller still holds the lease. Retries (parks the run in
  `delayed` for the backoff) while the error is retryable and attempts remain; otherwise fails
  the run for good, stores the error with its retention and publishes it.

  KEYS[1] run:<id>    hash
  KEYS[2] steps:<id>  hash
  KEYS[3] leases      zset
  KEYS[4] limits      hash
  KEYS[5] delayed     zset
  KEYS[6] seq         string
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  ARGV[3] lease token
  ARGV[4] error as JSON { name, message, stack }
  ARGV[5] 1 retryable | 0 not retryable
  ARGV[6] backoff before the next attempt, in ms
  ARGV[7] retention in ms
  Reply: 'retry' | 'failed' | 'lost' (nothing written)
]]
-- @include common

local base = ARGV[1]
local workflow = leasedWorkflow(KEYS[1], ARGV[3])
if not workflow then return 'lost' end
releaseSlot(base, KEYS[3], KEYS[4], ARGV[2], workflow, true)

local now = nowMs()
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
local maxAttempts = tonumber(redis.call('HGET', KEYS[1], 'maxAttempts'))
if ARGV[5] == '1' and failures < maxAttempts then
  local delay = tonumber(ARGV[6])
  redis.call('HSET', KEYS[1], 'error', ARGV[4])
  if delay <= 0 then
    -- No backoff: due again now, behind the runs of its priority that are already due.
    redis.call('HSET', KEYS[1], 'state', 'waiting')
    redis.call('ZADD', base .. 'wf:' .. workflow .. ':waiting', waitingScore(KEYS[6], redis.call('HGET', KEYS[1], 'priority')), ARGV[2])
    wake(base .. 'wf:' .. workflow .. ':wake')
  else
    redis.call('HSET', KEYS[1], 'state', 'delayed', 'dueAt', now + delay)
    local head = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')
    redis.call('ZADD', KEYS[5], now + delay, ARGV[2])
    if #head == 0 or tonumber(head[2]) > now + delay then wake(base .. 'wf:' .. workflow .. ':wake') end
  end
  return 'retry'
end
finishRun(base, KEYS[1], KEYS[2], ARGV[2], workflow, 'failed', 'error', ARGV[4], now, tonumber(ARGV[7]))
return 'failed'
