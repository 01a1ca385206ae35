#!lua
--[[
  fail: record a failed attempt, if the caller still holds the lease. Retries while the error is
  retryable and attempts remain — after the backoff in the workflow's delayed set, or at once —
  otherwise fails the run for good, stores the error with its retention and publishes it, and
  indexes it (see countFinished in finish.lua: with `keep` at 0 the record goes at once, so a
  retry after a lost reply then answers 'lost').

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, records, waits, slots, finish

  KEYS[1] run:<id>  hash
  KEYS[2] leases    zset
  KEYS[3] limits    hash
  KEYS[4] seq       string
  KEYS[5], KEYS[6] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  ARGV[3] lease token
  ARGV[4] error as JSON { name, message, stack }
  ARGV[5] 1 retryable | 0 not retryable
  ARGV[6] backoff before the next attempt, in ms
  ARGV[7] retention in ms
  ARGV[8] the attempt's journal '<slot> <json>' or '' (see hsetRun in records.lua)
  Reply: 'retry' | 'failed' | 'lost' (nothing written). A retry of a call that landed (its reply
         was lost) answers what that call did, from the run's 'ended' field, and writes nothing;
         so does a call whose attempt ended otherwise under the same token ('suspended' by a
         wait, 'continued' by continue.lua).
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
-- @include waits
-- @include slots
-- @include finish

local base, id = ARGV[1], ARGV[2]
local workflow, group, waited, linked = leasedRun(KEYS[1], ARGV[3])
if not workflow then
  local ended = redis.call('HGET', KEYS[1], 'ended') or ''
  local mine = ARGV[3] .. ':'
  if string.sub(ended, 1, #mine) == mine then return string.sub(ended, #mine + 1) end
  return 'lost'
end
local freed = {}
releaseSlots(base, KEYS[2], KEYS[3], KEYS[4], id, workflow, group, freed)

local now = nowMs()
local outcome = 'failed'
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
-- A lean run record (records.lua) leaves out maxAttempts at its default, 3.
local maxAttempts = tonumber(redis.call('HGET', KEYS[1], 'maxAttempts')) or 3
if ARGV[5] == '1' and failures < maxAttempts then
  outcome = 'retry'
  local delay = tonumber(ARGV[6])
  redis.call('HSET', KEYS[1], 'error', ARGV[4])
  if delay <= 0 then
    -- No backoff: due again now, behind the runs of its priority that are already due (`dueAt`
    -- says since when: a claim's queue wait is measured from it).
    redis.call('HSET', KEYS[1], 'state', 'waiting', 'dueAt', now)
    makeDue(base, KEYS[3], KEYS[4], workflow, group, id, redis.call('HGET', KEYS[1], 'priority'), false)
  else
    redis.call('HSET', KEYS[1], 'state', 'delayed', 'dueAt', now + delay)
    addDelayed(base, workflow, id, now + delay, redis.call('ZRANGE', wfKey(base, workflow, 'delayed'), 0, 0, 'WITHSCORES'))
  end
else
  finishRun(base, KEYS[1], id, workflow, 'failed', 'error', ARGV[4], now, tonumber(ARGV[7]), waited, linked)
end
hsetRun(KEYS[1], ARGV[8], 'ended', ARGV[3] .. ':' .. outcome)
-- After the last write to the run: retention by count may delete its hash right here.
if outcome == 'failed' then
  countFinished(base, KEYS[3], { [workflow] = { id } }, 'failed', now, tonumber(ARGV[7]))
end
wakeCapped(base, KEYS[3], freed)
return outcome
