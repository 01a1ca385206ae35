#!lua
--[[
  release: hand a claimed run back without counting a failure (its worker is shutting down and
  could not finish it in time). The run is due again, at the front of its priority (it was due
  before anything queued behind it); its step memo stays.

  KEYS[1] run:<id>  hash
  KEYS[2] leases    zset
  KEYS[3] limits    hash
  KEYS[4] seq       string
  KEYS[5], KEYS[6] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  ARGV[3] lease token
  Reply: 1 released (also for a retry of a call that landed) | 0 lease lost (nothing written)
]]
-- @include common

local workflow, group = leasedRun(KEYS[1], ARGV[3])
if not workflow then
  return redis.call('HGET', KEYS[1], 'ended') == ARGV[3] .. ':released' and 1 or 0
end
local freed = {}
releaseSlots(ARGV[1], KEYS[2], KEYS[3], KEYS[4], ARGV[2], workflow, group, freed)
redis.call('HSET', KEYS[1], 'state', 'waiting', 'ended', ARGV[3] .. ':released')
makeDue(ARGV[1], KEYS[3], KEYS[4], workflow, group, ARGV[2], redis.call('HGET', KEYS[1], 'priority'), true)
wakeCapped(ARGV[1], KEYS[3], freed)
return 1
