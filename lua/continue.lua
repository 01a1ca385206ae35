#!lua
--[[
  continue: `ctx.continueAsNew(input)` — the run starts afresh under the same id, if the caller
  still holds its lease. In one call: its step memo (every 'step:' field: results, wait outcomes,
  position entries) and its attempts' journals ('tl:' fields) are deleted, its input is replaced,
  its attempts, failures, stalls and hand-backs go back to 0 and its last error goes, its incarnation 'gen'
  grows by one (claims carry it, see memoOf in claim.lua), and it gives up its lease and every
  slot, as a release does, to be due again now at the back of its priority (makeDue), so a run
  that loops this way takes its turn like any other. Nothing is published and no finish is
  counted: a waiter keeps waiting for the last incarnation's outcome. Its mailbox, parent link,
  group, priority, time limit and progress stay.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, slots

  KEYS[1] run:<id>  hash
  KEYS[2] leases    zset
  KEYS[3] limits    hash
  KEYS[4] seq       string
  KEYS[5], KEYS[6] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  ARGV[3] lease token
  ARGV[4] the new input, encoded
  Reply: 'continued' | 'lost' (nothing written). A retry of a call that landed (its reply was
         lost) answers 'continued' from the run's 'ended' field, and writes nothing.
]]
-- @include time
-- @include util
-- @include lanes
-- @include wakes
-- @include limits
-- @include leases
-- @include rates
-- @include caps
-- @include groups
-- @include slots

local base, id, token = ARGV[1], ARGV[2], ARGV[3]
local runKey = KEYS[1]
local workflow, group = leasedRun(runKey, token)
if not workflow then
  return redis.call('HGET', runKey, 'ended') == token .. ':continued' and 'continued' or 'lost'
end

-- The memo is bounded by maxRunMemoBytes and the journals by their slots: one bounded read.
local doomed = { 'error', 'handbacks' }
for _, field in ipairs(redis.call('HKEYS', runKey)) do
  local prefix = string.sub(field, 1, 3)
  if prefix == 'ste' and string.sub(field, 1, 5) == 'step:' or prefix == 'tl:' then doomed[#doomed + 1] = field end
end
local priority = redis.call('HGET', runKey, 'priority')

callChunked('HDEL', runKey, doomed, 500)
local freed = {}
releaseSlots(base, KEYS[2], KEYS[3], KEYS[4], id, workflow, group, freed)
redis.call('HINCRBY', runKey, 'gen', 1)
redis.call('HSET', runKey, 'input', ARGV[4], 'state', 'waiting', 'dueAt', nowMs(), 'attempts', 0, 'failures', 0, 'stalls', 0,
  'ended', token .. ':continued')
makeDue(base, KEYS[3], KEYS[4], workflow, group, id, priority, false)
wakeCapped(base, KEYS[3], freed)
return 'continued'
