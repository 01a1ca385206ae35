#!lua
--[[
  schedule-plan: a worker's answer to a plan request of reserve (see askPlan in schedules.lua),
  written only if the schedule is as the request saw it (compare-and-set on `rev` and on the
  next-fire or plan tail), so two workers answering the same request, or an answer racing a
  change of the schedule, cannot plan an occurrence twice.
  - 'extend': appends occurrences after the plan's tail `seen`.
  - 'replan': replaces a plan that ran out (next-fire `seen`): occurrences owed since the last
    fire (bounded by catchUp) followed by the next ones, all computed from Redis time; the index
    follows, and the workflow's workers are woken to fire what is due.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, records, schedules

  KEYS[1] schedule:<id> hash
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] id
  ARGV[3] rev the request carried
  ARGV[4] 'extend' | 'replan'
  ARGV[5] seen: the plan's tail ('extend') or the next-fire ('replan', '' if none)
  ARGV[6] occurrences (ascending ms, comma-separated)
  Reply: 1 written, 0 stale request (nothing written)
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

local base, id = ARGV[1], ARGV[2]
local f = redis.call('HMGET', KEYS[1], 'workflow', 'rev', 'next', 'plan', 'paused')
if not f[1] or f[5] == '1' or f[2] ~= ARGV[3] or ARGV[6] == '' then return 0 end
local times = csvNumbers(ARGV[6])

if ARGV[4] == 'extend' then
  local plan = csvNumbers(f[4])
  local tail = f[3]
  if #plan > 0 then tail = msText(plan[#plan]) end
  if tail ~= ARGV[5] then return 0 end
  local fresh = {}
  for _, t in ipairs(times) do if t > tonumber(tail) then fresh[#fresh + 1] = t end end
  local joined = numbersCsv(fresh)
  if f[4] and f[4] ~= '' then joined = f[4] .. ',' .. joined end
  redis.call('HSET', KEYS[1], 'plan', joined)
  redis.call('HDEL', KEYS[1], 'asked')
  return 1
end

if (f[3] or '') ~= ARGV[5] then return 0 end
redis.call('HSET', KEYS[1], 'next', msText(times[1]), 'plan', numbersCsv(times, 2), 'rev', tonumber(f[2]) + 1)
redis.call('HDEL', KEYS[1], 'asked')
redis.call('ZADD', wfKey(base, f[1], 'next-fires'), msText(times[1]), id)
wake(wfKey(base, f[1], 'wake'))
return 1
