--[[
  complete: finish a run successfully, if the caller still holds its lease. Stores the result
  with its retention, releases the run's slot and publishes the result on the run's done channel.

  KEYS[1] run:<id>    hash
  KEYS[2] steps:<id>  hash
  KEYS[3] leases      zset
  KEYS[4] limits      hash
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  ARGV[3] lease token
  ARGV[4] encoded result ('' = undefined)
  ARGV[5] retention in ms
  Reply: 1 completed | 0 lease lost (nothing written)
]]
-- @include common

local workflow = leasedWorkflow(KEYS[1], ARGV[3])
if not workflow then return 0 end
releaseSlot(ARGV[1], KEYS[3], KEYS[4], ARGV[2], workflow)
finishRun(ARGV[1], KEYS[1], KEYS[2], ARGV[2], 'completed', 'result', ARGV[4], nowMs(), tonumber(ARGV[5]))
return 1
