#!lua
--[[
  complete: finish a batch of runs successfully — each only if the caller still holds its lease.
  Per run: store the result with its retention, release its slots, publish the result on its
  done channel. Then refill the freed slots in the same call: claim up to ARGV[3] due runs, as
  reserve does, so a busy worker needs about one call per batch of finished runs. Step results
  finished in the same event-loop turn ride along (as in save-steps), saving a call. The batch's
  runs enter their workflow's finish index in one write, with the bounded retention trims (see
  countFinished in finish.lua).

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, records, waits, slots, finish, claim, claim-pass, steps

  KEYS[1] call:<call id> string: this call's claims, kept for a retry after a lost reply (see
          replayClaims in claim.lua); a retry is sent with the same call id and arguments
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  Also, named from the key base: leases (zset), limits (hash), seq (string), each run's record
          and its workflow's keys, all in the same slot. Not passed as keys: each key a call
          passes costs Redis about 1,000 instructions, a tenth of what this whole call's Lua
          costs on the plain path (see bench/redis.instructions.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] retention in ms
  ARGV[3] runs to claim for the caller (0 = none)
  ARGV[4] lease length in ms for claimed runs
  ARGV[5] flags, added up: 1 if this call repeats one whose reply was lost (look for its claims
          first); 2 to have each claim carry the telemetry extras (see withExtras in claim.lua)
  ARGV[6] the caller's park announcement ('<worker id>:<lease ms>', see park.lua), or '': if the
          refill claims fewer runs than ARGV[3], the caller will block on its wake lists next,
          and is announced as parked here (for ARGV[7] ms) instead of in a park call of its own,
          so an enqueue arriving meanwhile is handed straight to it (the fast path of a worker
          whose every slot was busy, e.g. one of concurrency 1). Not when a rate limit holds runs
          back: only a reserve tells the worker when the window frees, so it must reserve next
  ARGV[7] how long that announcement stays valid, in ms
  ARGV[8] the caller's process inbox id (lib/client/run.inbox.ts), or '': a plain commit (below)
          of a run whose waiter is that inbox does not announce it there (see callerInbox in
          finish.lua): the caller tells its own process's run() waits itself, from this reply, a
          pub/sub hop sooner. Only a plain commit: it keeps the record for its retention (no
          finish index, so no trim deletes it), where a re-read finds the outcome should the
          reply be lost
  ARGV[9] W, the number of workflow names that follow
  ARGV[10 .. 9+W] workflow names the caller runs (rotated by the caller)
  ARGV[10+W] S, the number of step results that follow
  ARGV[11+W .. 10+W+4S] per step, four values: run id, lease token, step key, encoded result
  ARGV[11+W+4S ..] per run, four values: run id, lease token, encoded result ('' = undefined),
          the attempt's journal '<slot> <json>' or '' (see hsetRun in records.lua)
  Reply: flat, { 1 if the caller was announced parked | 0, R, per run: 1 completed | 0 lease
         lost, S, per step: 1 saved | 0 lease lost, claims… } with the claims as appendClaim
         (claim.lua) lays them out (with the extras if asked for); a lost lease writes nothing.
         Without claims (an idle worker's commit, the common case at low load), those numbers
         as one string, separated by spaces: Redis turns a table into a reply at several times
         the cost of a string (a deferred length and one reply write per element)
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
-- @include claim
-- @include claim-pass
-- @include steps

-- One EXISTS for the limits hash (see primeLimits) and, for a refill of one workflow, the keys a
-- claim of it would take from (see claimRuns): the hash is named once more than there are other
-- keys, so the two counts read apart. Returns true if that workflow has nothing due.
local function lookAhead(limitsKey, base, workflows, wanted)
  if wanted == 0 or #workflows ~= 1 then
    limitsAbsent = redis.call('EXISTS', limitsKey) == 0
    return false
  end
  local lane = laneOf(base, workflows[1], '')
  local count = redis.call('EXISTS', limitsKey, limitsKey, limitsKey, limitsKey, limitsKey,
    lane .. 'queue', lane .. 'waiting', lane .. 'wake', lane .. 'ready')
  limitsAbsent = count < 5
  return count % 5 == 0
end

local base = ARGV[1]
local limitsKey, seqKey = base .. 'limits', base .. 'seq'
local ttl = steadyNumber(ARGV[2])
local wanted, lockMs = smallNumber(ARGV[3]), steadyNumber(ARGV[4])
local now = nowMs()
local workflowCount = smallNumber(ARGV[9])
local workflows = {}
for i = 10, 9 + workflowCount do workflows[#workflows + 1] = ARGV[i] end
local stepsAt = 11 + workflowCount
local stepsEnd = stepsAt + 4 * smallNumber(ARGV[10 + workflowCount]) - 1

-- A plain commit, a low load's usual one: one run, no steps, the run ungrouped and unlinked, in
-- a namespace without a limits hash (no cap, control or kept index). It finishes in straight
-- lines, and when nothing is due (lookAhead: nothing a plain finish writes makes a run due), it
-- ends there, as the general path would, without its work. `lone`: the lease of a call's one run.
local lone, plain, dry = false, false, false
local loneWorkflow, loneGroup, loneWaited, loneLinked
if #ARGV == stepsEnd + 4 then
  lone = true
  loneWorkflow, loneGroup, loneWaited, loneLinked = leasedRun(base .. 'run:' .. ARGV[stepsEnd + 1], ARGV[stepsEnd + 2])
  if loneWorkflow and loneGroup == '' and not loneLinked then
    dry = lookAhead(limitsKey, base, workflows, wanted)
    plain = limitsAbsent
  end
end
primeLimits(limitsKey, workflows, true)
-- A batch writes each active index once, at the end (see deferActiveWrites); a single run's
-- writes are as many commands either way.
if #ARGV - stepsEnd > 4 then deferActiveWrites() end

local saved = saveSteps(base, stepsAt, stepsEnd)

-- Made only past the plain commit's early return: a table is an allocation and its collection.
local statuses, freed
if plain then
  local id, workflow = ARGV[stepsEnd + 1], loneWorkflow
  callerInbox = ARGV[8]
  removeActive(KEYS_LEASES, id)
  removeActive(wfKey(base, workflow, 'active'), id)
  finishRun(base, base .. 'run:' .. id, id, workflow, 'completed', 'result', ARGV[stepsEnd + 3], now, ttl, loneWaited, false, ARGV[stepsEnd + 4])
  -- countFinished without a limits hash: no finish index is kept, only the total.
  redis.call('HINCRBY', wfKey(base, workflow, 'stats'), 'completed', '1')
  if dry or wanted == 0 then
    local parked = 0
    if wanted > 0 and ARGV[6] ~= '' then
      parkWorker(base, ARGV[6], steadyNumber(ARGV[7]), workflows, false)
      parked = 1
    end
    if #saved == 0 then return parked .. ' 1 1 0' end
    return parked .. ' 1 1 ' .. #saved .. ' ' .. table.concat(saved, ' ')
  end
  statuses, freed = { 1 }, { [workflow] = true }
else
  statuses, freed = {}, {}
  local tally = {}
  deferredGroups = {}
  for i = stepsEnd + 1, #ARGV, 4 do
    local id = ARGV[i]
    local runKey = base .. 'run:' .. id
    local workflow, group, waited, linked
    if lone then
      workflow, group, waited, linked = loneWorkflow, loneGroup, loneWaited, loneLinked
    else
      workflow, group, waited, linked = leasedRun(runKey, ARGV[i + 1])
    end
    if workflow then
      releaseSlots(base, KEYS_LEASES, limitsKey, seqKey, id, workflow, group, freed)
      finishRun(base, runKey, id, workflow, 'completed', 'result', ARGV[i + 2], now, ttl, waited, linked, ARGV[i + 3])
      tallyFinished(tally, workflow, id)
      statuses[#statuses + 1] = 1
    else
      -- Completed by this very token already: a resent call whose first reply was lost.
      local f = redis.call('HMGET', runKey, 'state', 'token')
      statuses[#statuses + 1] = (f[1] == 'completed' and f[2] == ARGV[i + 1]) and 1 or 0
    end
  end
  countFinished(base, limitsKey, tally, 'completed', now, ttl)
end

-- The reply, flat: parked (known at the end), the statuses, then the claims (appendClaim).
local reply = { 0, #statuses }
for i = 1, #statuses do reply[i + 2] = statuses[i] end
reply[#reply + 1] = #saved
for i = 1, #saved do reply[#reply + 1] = saved[i] end
local unclaimed = #reply
-- No wake to pass on: this worker comes back for more with its next completions. Claiming
-- (even of nothing) settles the groups whose slots freed above.
local flags = smallNumber(ARGV[5]) or 0
withExtras = flags >= 2
if flags % 2 == 1 and replayClaims(base, KEYS_LEASES, KEYS[1], now, lockMs, reply) then
  settleGroups(base, limitsKey, seqKey, freed)
else
  claimRuns(base, KEYS_LEASES, limitsKey, seqKey, workflows, wanted, now, lockMs, reply, false, freed, (plain and #workflows == 1) and workflows[1] or nil)
  rememberClaims(KEYS[1], lockMs)
end
-- Only now, after the refill took what it could, is leftover room worth waking a worker for.
wakeCapped(base, limitsKey, freed)
local parked = 0
if ARGV[6] ~= '' and claimCount < wanted then
  noteHeldGroups(base, limitsKey, workflows)
  if not rateWakeAt then
    parkWorker(base, ARGV[6], steadyNumber(ARGV[7]), workflows, false)
    parked = 1
  end
end
reply[1] = parked
flushActiveWrites()
if #reply == unclaimed then return table.concat(reply, ' ') end
return reply
