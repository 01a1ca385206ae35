--[[
  save-step: persist one finished step's result, if the caller still holds the run's lease.
  The step counts as done only after this returns 1.

  KEYS[1] run:<id>    hash
  KEYS[2] steps:<id>  hash
  ARGV[1] lease token
  ARGV[2] step key '<name>#<occurrence>'
  ARGV[3] encoded result ('' = undefined)
  Reply: 1 saved | 0 lease lost (nothing written)
]]
-- @include common

if not leasedWorkflow(KEYS[1], ARGV[1]) then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1
