#!lua
--[[
  park: record that a worker is about to block on its workflows' wake lists, so the enqueue fast
  path knows a handoff will be taken at once. Entries expire by score (Redis time + ttl), so a
  worker that dies while parked is forgotten without cleanup; expired ones are dropped here (and
  by the stalled scan, see reserve.lua), not by a complete call's announcement.

  Includes: time, util, wakes

  KEYS[1] leases  zset (unused; routes the call to the namespace's cluster slot)
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] worker id, ending in ':<its lease length in ms>' (enqueue gives a handoff that lease)
  ARGV[3] how long the entry stays valid, in ms (the block timeout plus slack)
  ARGV[4..] workflow names the worker blocks on
  Reply: 1
]]
-- @include time
-- @include util
-- @include wakes

local workflows = {}
for i = 4, #ARGV do workflows[#workflows + 1] = ARGV[i] end
parkWorker(ARGV[1], ARGV[2], tonumber(ARGV[3]), workflows, true)
return 1
