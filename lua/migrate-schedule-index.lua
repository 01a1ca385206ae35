#!lua
--[[
  migrate-schedule-index: the migration step from layout 2 to 3, one batch: rebuilds the derived
  schedule index (each workflow's `schedules` listing and `next-fires` zset) from the schedule
  hashes, the truth, for the next SCHEDULE_BATCH_SIZE ids of the `schedules` zset after the
  cursor; an id whose hash is gone leaves every set. Layouts before 3 had no schedules, so on
  their data this finds nothing; run again on layout 3 data it changes nothing (idempotent). Under
  the migration lock (see migrate-lock.lua): with another token, nothing is written.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, records, schedules

  KEYS[1] migrate-lock   string: the migration lock
  KEYS[2] schedules      zset: every schedule id
  KEYS[3], KEYS[4] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] the caller's lock token
  ARGV[3] cursor: the last id of the previous batch, or '' to start
  Reply: { 0 } when the token does not hold the lock (nothing written); otherwise
         { 1, next cursor ('' = done) }
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
-- @include records
-- @include schedules

local SCHEDULE_BATCH_SIZE = 500

if redis.call('GET', KEYS[1]) ~= ARGV[2] then return { 0 } end
local base, now = ARGV[1], nowMs()
local from = '-'
if ARGV[3] ~= '' then from = '(' .. ARGV[3] end
local ids = redis.call('ZRANGEBYLEX', KEYS[2], from, '+', 'LIMIT', 0, SCHEDULE_BATCH_SIZE)
for _, id in ipairs(ids) do
  local workflow = redis.call('HGET', scheduleKey(base, id), 'workflow')
  if workflow then
    redis.call('ZADD', wfKey(base, workflow, 'schedules'), 0, id)
    indexSchedule(base, workflow, id, now)
  else
    redis.call('ZREM', KEYS[2], id)
  end
end
if #ids < SCHEDULE_BATCH_SIZE then return { 1, '' } end
return { 1, ids[#ids] }
