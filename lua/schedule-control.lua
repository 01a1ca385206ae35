#!lua
--[[
  schedule-control: pause, resume or remove one schedule, hash and index together (see
  schedules.lua).
  - 'pause': no occurrence fires until resumed (the plan is dropped: nothing is owed for the pause).
  - 'resume': takes the plan given, computed by the caller from Redis time after reading the
    schedule at `rev` (compare-and-set: a schedule changed since is not resumed: read again).
  - 'remove': deletes the schedule. Runs it started are left alone.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, records, schedules

  KEYS[1] schedules   zset: every schedule id
  KEYS[2] schedule:<id> hash
  KEYS[3], KEYS[4] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] id
  ARGV[3] 'pause' | 'resume' | 'remove'
  ARGV[4] resume: the rev the plan was computed at
  ARGV[5] resume: the plan (ascending ms, comma-separated)
  Reply: 0 no such schedule; 1 done; 2 nothing to do (already paused / not paused);
         -1 (resume) the schedule changed since it was read
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

local base, id, op = ARGV[1], ARGV[2], ARGV[3]
local f = redis.call('HMGET', KEYS[2], 'workflow', 'paused', 'rev')
if not f[1] then return 0 end
local indexKey = wfKey(base, f[1], 'next-fires')
local now = nowMs()

if op == 'remove' then
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', wfKey(base, f[1], 'schedules'), id)
  redis.call('ZREM', indexKey, id)
  redis.call('SREM', wfKey(base, f[1], 'declared'), id)
  return 1
end

local paused = f[2] == '1'
if op == 'pause' then
  if paused then return 2 end
  redis.call('HSET', KEYS[2], 'paused', 1, 'rev', (tonumber(f[3]) or 0) + 1, 'updatedAt', now)
  redis.call('HDEL', KEYS[2], 'next', 'plan', 'asked')
  redis.call('ZREM', indexKey, id)
  return 1
end

if not paused then return 2 end
if f[3] ~= ARGV[4] then return -1 end
local times = csvNumbers(ARGV[5])
redis.call('HDEL', KEYS[2], 'paused', 'asked')
redis.call('HSET', KEYS[2], 'next', msText(times[1]), 'plan', numbersCsv(times, 2), 'since', now,
  'rev', (tonumber(f[3]) or 0) + 1, 'updatedAt', now)
redis.call('ZADD', indexKey, msText(times[1]), id)
wake(wfKey(base, f[1], 'wake'))
return 1
