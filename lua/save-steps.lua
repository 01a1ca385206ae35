#!lua
--[[
  save-steps: persist a batch of finished steps' results in their runs' records (fields
  'step:<name>#<occurrence>') — each only if the caller still holds that run's lease. A step
  counts as done only after its status here is 1. It includes only `steps`: it runs once per few
  steps on the hot path, so it carries no code it does not use.

  Includes: steps

  KEYS[1] leases  zset (unused; routes the call to the namespace's cluster slot)
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2 ..] per step, four values: run id, lease token, step key '<name>#<occurrence>',
             encoded result ('' = undefined)
  Reply: { per step: 1 saved | 0 lease lost, nothing written }
]]
-- @include steps

return saveSteps(ARGV[1], 2, #ARGV)
