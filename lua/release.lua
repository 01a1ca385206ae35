#!lua
--[[
  release: hand a claimed run back without counting a failure. Two callers:
  - a worker shutting down that could not finish the run in time (no ARGV[4]): the run is due
    again at once, at the front of its priority (it was due before anything queued behind it);
  - an attempt whose own commits (step saves, waits) could not reach Redis (ARGV[4] and ARGV[5]):
    the run is delayed by ARGV[4] * 2^(its earlier such hand-backs), at most ARGV[5], and its
    count 'handbacks' goes up — a run whose commits keep failing does not spin.
  Its step memo stays either way.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, slots

  KEYS[1] run:<id>  hash
  KEYS[2] leases    zset
  KEYS[3] limits    hash
  KEYS[4] seq       string
  KEYS[5], KEYS[6] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  ARGV[3] lease token
  ARGV[4] optional: first hand-back delay in ms (absent or '': due at once, 'handbacks' untouched)
  ARGV[5] optional: longest hand-back delay in ms (with ARGV[4])
  Reply: 1 released (also for a retry of a call that landed) | 0 lease lost (nothing written)
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

local base, id = ARGV[1], ARGV[2]
local workflow, group = leasedRun(KEYS[1], ARGV[3])
if not workflow then
  return redis.call('HGET', KEYS[1], 'ended') == ARGV[3] .. ':released' and 1 or 0
end
-- Every read before the first write.
local firstDelay = tonumber(ARGV[4] or '')
local dueAt, handbacks, earliest
if firstDelay and firstDelay > 0 then
  handbacks = tonumber(redis.call('HGET', KEYS[1], 'handbacks') or '0')
  dueAt = nowMs() + math.min(tonumber(ARGV[5]), firstDelay * 2 ^ math.min(handbacks, 30))
  earliest = redis.call('ZRANGE', wfKey(base, workflow, 'delayed'), 0, 0, 'WITHSCORES')
end

local freed = {}
releaseSlots(base, KEYS[2], KEYS[3], KEYS[4], id, workflow, group, freed)
if dueAt then
  redis.call('HSET', KEYS[1], 'state', 'delayed', 'dueAt', dueAt, 'handbacks', handbacks + 1, 'ended', ARGV[3] .. ':released')
  addDelayed(base, workflow, id, dueAt, earliest)
else
  redis.call('HSET', KEYS[1], 'state', 'waiting', 'ended', ARGV[3] .. ':released')
  makeDue(base, KEYS[3], KEYS[4], workflow, group, id, redis.call('HGET', KEYS[1], 'priority'), true)
end
wakeCapped(base, KEYS[3], freed)
return 1
