#!lua
--[[
  finish-batch: commit the outcome of a batch run's attempt (docs/batches.md), if the caller still
  holds its lease, together with its members', in one step: a worker killed at any point leaves
  either nothing (the batch is recovered and run again whole, with its step memo) or all of it.

  'completed': each member still in the batch (state 'batched', its 'batch' this one: a member
  cancelled meanwhile keeps its outcome) stores its own result and finishes as a completed run of
  its workflow, announced to its waiters (done channel, inbox) as any run's end; then the batch
  run completes, its result the number of members it completed. 'failed': as lua/fail.lua does
  for any run (a retry, after the backoff or at once, keeps the members waiting in the batch),
  and a batch that fails for good fails each of its members with its error.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, records, waits, slots, finish, batches

  KEYS[1] run:<batch id>    hash
  KEYS[2] batch:<batch id>  list: the member ids
  KEYS[3], KEYS[4] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  Also, named from the key base: leases, limits, seq, the members' records and the workflows' keys
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] batch run id
  ARGV[3] lease token
  ARGV[4] retention in ms
  ARGV[5] the attempt's journal '<slot> <json>' or '' (see hsetRun in records.lua)
  ARGV[6] 'completed' or 'failed'
  completed: ARGV[7 ..] per member the attempt ran, two values: member id, encoded result
  failed:    ARGV[7] error as JSON { name, message, stack }; ARGV[8] 1 retryable | 0 not;
             ARGV[9] backoff before the next attempt, in ms
  Reply: 'completed' | 'retry' | 'failed' | 'lost' (nothing written). A retry of a call that
         landed (its reply was lost) answers what that call did, and writes nothing.
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
-- @include batches

local base, id, token = ARGV[1], ARGV[2], ARGV[3]
local ttl = tonumber(ARGV[4])
local outcome = ARGV[6]
local workflow, group, waited, linked = leasedRun(KEYS[1], token)
if not workflow then
  local f = redis.call('HMGET', KEYS[1], 'ended')
  local mine = token .. ':'
  if f[1] and string.sub(f[1], 1, #mine) == mine then return string.sub(f[1], #mine + 1) end
  return 'lost'
end

-- Reads: the members' workflow, the attempt count, and the members still in this batch.
local b = redis.call('HMGET', KEYS[1], 'batchOf', 'failures', 'maxAttempts')
local memberOf = b[1] or ''
local failures = (tonumber(b[2]) or 0) + 1
local retry = outcome == 'failed' and ARGV[8] == '1' and failures < (tonumber(b[3]) or 3)
local members = {}
local function addMember(memberId, payload)
  local runKey = base .. 'run:' .. memberId
  local m = redis.call('HMGET', runKey, 'state', 'batch', 'waited', 'links')
  if m[1] == 'batched' and m[2] == id then members[#members + 1] = { memberId, runKey, payload, m[3], m[4] == '1' } end
end
if outcome == 'completed' then
  for i = 7, #ARGV, 2 do addMember(ARGV[i], ARGV[i + 1]) end
end

-- Writes.
local now = nowMs()
local limitsKey, seqKey = base .. 'limits', base .. 'seq'
local freed = {}
releaseSlots(base, KEYS_LEASES, limitsKey, seqKey, id, workflow, group, freed)
if retry then
  outcome = 'retry'
  redis.call('HSET', KEYS[1], 'failures', intText(failures), 'error', ARGV[7])
  local delay = tonumber(ARGV[9])
  if delay <= 0 then
    redis.call('HSET', KEYS[1], 'state', 'waiting', 'dueAt', now)
    makeDue(base, limitsKey, seqKey, workflow, group, id, redis.call('HGET', KEYS[1], 'priority'), false)
  else
    redis.call('HSET', KEYS[1], 'state', 'delayed', 'dueAt', now + delay)
    addDelayed(base, workflow, id, now + delay, redis.call('ZRANGE', wfKey(base, workflow, 'delayed'), 0, 0, 'WITHSCORES'))
  end
  hsetRun(KEYS[1], ARGV[5], 'ended', token .. ':retry')
else
  local tally = {}
  if outcome == 'completed' then
    for _, m in ipairs(members) do
      finishRun(base, m[2], m[1], memberOf, 'completed', 'result', m[3], now, ttl, m[4], m[5])
      tallyFinished(tally, memberOf, m[1])
    end
    finishRun(base, KEYS[1], id, workflow, 'completed', 'result', tostring(#members), now, ttl, waited, linked)
    redis.call('PEXPIRE', KEYS[2], steadyText(ttl))
  else
    endMembers(base, id, memberOf, 'failed', 'error', ARGV[7], now, ttl, tally)
    redis.call('HSET', KEYS[1], 'failures', intText(failures))
    finishRun(base, KEYS[1], id, workflow, 'failed', 'error', ARGV[7], now, ttl, waited, linked)
  end
  hsetRun(KEYS[1], ARGV[5], 'ended', token .. ':' .. outcome)
  -- After the last write to the runs: retention by count may delete their hashes right here.
  countFinished(base, limitsKey, tally, outcome, now, ttl)
  countFinished(base, limitsKey, { [workflow] = { id } }, outcome, now, ttl)
end
wakeCapped(base, limitsKey, freed)
return outcome
