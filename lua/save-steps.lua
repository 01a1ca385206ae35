--[[
  save-steps: persist a batch of finished steps' results in their runs' records (fields
  'step:<name>#<occurrence>') — each only if the caller still holds that run's lease. A step
  counts as done only after its status here is 1. Self-contained (no includes): it runs once
  per few steps on the hot path, so it carries no code it does not use.

  KEYS[1] leases  zset (unused; routes the call to the namespace's cluster slot)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2 ..] per step, four values: run id, lease token, step key '<name>#<occurrence>',
             encoded result ('' = undefined)
  Reply: { per step: 1 saved | 0 lease lost, nothing written }
]]
local base = ARGV[1]
local statuses = {}
for i = 2, #ARGV, 4 do
  local runKey = base .. 'run:' .. ARGV[i]
  local lease = redis.call('HMGET', runKey, 'state', 'token')
  if lease[1] == 'active' and lease[2] == ARGV[i + 1] then
    redis.call('HSET', runKey, 'step:' .. ARGV[i + 2], ARGV[i + 3])
    statuses[#statuses + 1] = 1
  else
    statuses[#statuses + 1] = 0
  end
end
return statuses
