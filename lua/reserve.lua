#!lua
--[[
  reserve: one call per worker wake. Promotes the worker's workflows' due delayed runs, fires
  their due cron schedules (both bounded; see schedules.lua), brings back the groups whose rate
  window freed and a batch of a rate review under way, recovers stalled runs and sweeps
  the schedule index for stale entries and the parked sets for expired announcements (at most
  once per interval fleet-wide), then claims up to ARGV[2] due
  runs fairly and under every cap (see claim-pass.lua). Each claim carries the run's step memo, so
  step reads during the run cost no round trip.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, rate-reviews, records,
            waits, slots, finish, claim, claim-pass, schedules, batches

  KEYS[1] stall-gate  string
  KEYS[2] call:<call id> string: this call's claims, kept for a retry after a lost reply (see
          replayClaims); a retry is sent with the same call id
  KEYS[3], KEYS[4] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  Also, named from the key base: leases (zset), limits (hash), seq (string) and the workflows'
          keys, all in the same slot (each key passed costs Redis as much as a short command)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] max runs to claim (0 = only promote and scan)
  ARGV[3] lease length in ms
  ARGV[4] stalled-scan interval in ms, or 0 to skip the scan this time
  ARGV[5] stalls a run may have before it fails for good
  ARGV[6] max delayed runs to promote per workflow
  ARGV[7] retention in ms of a run failed by the stall limit
  ARGV[8] the calling worker's id: it is awake, so its park announcements (park.lua) are void
  ARGV[9] flags, added up: 1 if this call repeats one whose reply was lost (look for its claims
          first); 2 to have each claim carry the telemetry extras (see withExtras in claim.lua);
          4 for a worker's first reserve when its code declares nothing (the boot check below)
  ARGV[10] how long to announce the caller parked (its entry ARGV[8], see park.lua) if it claims
          fewer runs than ARGV[2], in ms, or 0: it blocks on its wake lists next, and is announced
          here rather than in a park call of its own, as a complete call does
  ARGV[11..] workflow names this worker runs (rotated by the caller, so no workflow always goes first);
          with flag 4 they follow the boot check's arguments: ARGV[11] the fingerprint of a
          declaration of no schedules, ARGV[12] F, ARGV[13 .. 12+F] the limits-hash fields a
          declaration of no cap and no rate limit would clear (see alreadyDeclared)
  Reply: { head, claims… } with the claims flat as appendClaim (claim.lua) lays them out (with
         the extras if asked for); head = { ms until the worker's next
         delayed run, schedule fire or freeing rate window, or -1, Redis time in ms, stalled,
         cascade, 1 if the caller was announced parked | 0, plan requests… } (see
         askPlan in schedules.lua), where stalled lists the runs this call's stalled scan
         recovered, flat: { id, workflow, stalls, 1 requeued | 0 failed for good, … } (the worker
         reports them), and cascade the id of a run whose cancel cascade (the discovered zset
         'cascades', see cancel.lua) has not moved for a whole scan interval, or '' (the worker
         carries it on); a replay answers { 0, time } (reserve again at once); a failed boot check
         answers 'declare', having done nothing
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
-- @include rate-reviews
-- @include records
-- @include waits
-- @include slots
-- @include finish
-- @include claim
-- @include claim-pass
-- @include schedules
-- @include batches

local base = ARGV[1]
local limitsKey, seqKey = base .. 'limits', base .. 'seq'

local flags = tonumber(ARGV[9]) or 0
local workflows = {}
do
  local firstWorkflow = 11
  if flags >= 4 then
    -- The boot check of a worker whose code declares nothing: whether its declarations (lua/
    -- declare-limits.lua, set-control.lua, schedule-write.lua: four calls) would all find nothing
    -- to write. They would if no field a declaration of nothing clears holds a value or a runtime
    -- override ('runtime-limits', see origins.lua), and each workflow is registered, has its
    -- declaration of no schedules numbered, no schedule declared by code, no event subscription
    -- (declare-triggers.lua; in the same EXISTS) and its count of due grouped runs set up. It reads what is there, so it holds whoever wrote it (an older
    -- version's worker too): the latest bootstrap still wins. In a block: a script's main chunk
    -- may hold at most 200 locals, includes and all.
    local function alreadyDeclared(fieldsFrom, fieldsTo, workflowsFrom)
      -- In chunks of 500 fields: Lua's unpack is bounded.
      for from = fieldsFrom, fieldsTo, 500 do
        local to = math.min(from + 499, fieldsTo)
        for _, key in ipairs({ limitsKey, base .. 'runtime-limits' }) do
          local values = redis.call('HMGET', key, unpack(ARGV, from, to))
          for k = 1, to - from + 1 do
            if values[k] then return false end
          end
        end
      end
      for i = workflowsFrom, #ARGV do
        local wf = ARGV[i]
        if redis.call('SISMEMBER', base .. 'workflows', wf) == 0
            or redis.call('HEXISTS', wfKey(base, wf, 'declarations'), ARGV[11]) == 0
            or redis.call('EXISTS', wfKey(base, wf, 'declared'), wfKey(base, wf, 'on')) > 0
            or (redis.call('HEXISTS', wfKey(base, wf, 'stats'), 'groupDueExact') == 0
              and redis.call('SCARD', wfKey(base, wf, 'groups')) == 0) then
          return false
        end
      end
      return true
    end
    firstWorkflow = 13 + tonumber(ARGV[12])
    if not alreadyDeclared(13, firstWorkflow - 1, firstWorkflow) then return 'declare' end
  end
  for i = firstWorkflow, #ARGV do
    workflows[#workflows + 1] = ARGV[i]
    redis.call('ZREM', wfKey(base, ARGV[i], 'parked'), ARGV[8])
  end
end
local now = nowMs()

primeLimits(limitsKey, workflows, false, true)
withExtras = flags % 4 >= 2
local replayed = { { 0, now } }
if flags % 2 == 1 and replayClaims(base, KEYS_LEASES, KEYS[2], now, tonumber(ARGV[3]), replayed) then return replayed end

-- 1. Promote due delayed runs, fire due schedules.
local nextDue = -1
local stalled = {}
local head = { -1, now, stalled, '', 0 }
local fireBudget = FIRE_BUDGET
for _, wf in ipairs(workflows) do
  local fireIn
  fireBudget, fireIn = fireSchedules(base, limitsKey, seqKey, wf, now, fireBudget, head)
  if fireIn >= 0 and (nextDue < 0 or fireIn < nextDue) then nextDue = fireIn end
  local delayedKey = wfKey(base, wf, 'delayed')
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', delayedKey, '-inf', now, 'LIMIT', 0, tonumber(ARGV[6]))) do
    redis.call('ZREM', delayedKey, id)
    local runKey = base .. 'run:' .. id
    local f = redis.call('HMGET', runKey, 'priority', 'state', 'group', 'wait')
    if f[2] == 'delayed' then
      -- A durable wait whose deadline came ends by its time here, so its index counts only
      -- runs still waiting (claimRun ends one an older version promoted).
      if f[4] then endWaitByTime(base, runKey, id, wf, f[4]) end
      redis.call('HSET', runKey, 'state', 'waiting')
      makeDue(base, limitsKey, seqKey, wf, f[3] or '', id, f[1], false)
    end
  end
  local first = redis.call('ZRANGE', delayedKey, 0, 0, 'WITHSCORES')
  if #first > 0 then
    local inMs = math.max(0, tonumber(first[2]) - now)
    if nextDue < 0 or inMs < nextDue then nextDue = inMs end
  end
  -- Groups their rate limit held back whose window has freed rejoin the round-robin.
  if controlsOn(limitsKey) then
    local heldKey = wfKey(base, wf, 'rate-held')
    for _, group in ipairs(redis.call('ZRANGEBYSCORE', heldKey, '-inf', now, 'LIMIT', 0, 256)) do
      redis.call('ZREM', heldKey, group)
      if activateGroup(base, limitsKey, seqKey, wf, group) then wake(wfKey(base, wf, 'wake')) end
    end
  end
  -- A review of the groups a rate limit held (see startRateReview) goes on with every reserve of
  -- the workflow until it is done, whatever the controls say (the last limit removed turns them
  -- off): one that has groups left brings a worker back for the next batch.
  if limitOf(limitsKey, 'wf:' .. wf .. ':rate-review') then
    local left, joined = reviewRateHeld(base, limitsKey, seqKey, wf, 256)
    if joined or left > 0 then wake(wfKey(base, wf, 'wake')) end
  end
end

-- 2. Stalled runs, of any workflow: their lease ran out without a heartbeat (the worker died
-- or blocked its event loop).
local scanInterval = tonumber(ARGV[4])
if scanInterval > 0 and redis.call('SET', KEYS[1], '1', 'NX', 'PX', scanInterval) then
  local freed = {}
  local tally = {}
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS_LEASES, '-inf', now, 'LIMIT', 0, 100)) do
    local runKey = base .. 'run:' .. id
    local f = redis.call('HMGET', runKey, 'workflow', 'priority', 'state', 'token', 'input', 'group', 'waited', 'links', 'batchOf')
    if f[1] and f[3] == 'active' then
      local group = f[6] or ''
      releaseSlots(base, KEYS_LEASES, limitsKey, seqKey, id, f[1], group, freed)
      -- A fast-path handoff no worker took must not be taken after all, with a dead token.
      local wakeKey = wfKey(base, f[1], 'wake')
      if redis.call('LLEN', wakeKey) > 0 then redis.call('LREM', wakeKey, 1, handoffEntry(f[4], id, f[5])) end
      local stalls = redis.call('HINCRBY', runKey, 'stalls', 1)
      if stalls > tonumber(ARGV[5]) then
        local stalledError = '{"name":"StalledError","message":"lease expired ' .. stalls .. ' times (worker died or blocked the event loop)"}'
        finishRun(base, runKey, id, f[1], 'failed', 'error', stalledError, now, tonumber(ARGV[7]), f[7], f[8] == '1')
        tallyFinished(tally, f[1], id)
        -- A batch run (docs/batches.md) fails its members with it.
        if f[9] then endMembers(base, id, f[9], 'failed', 'error', stalledError, now, tonumber(ARGV[7]), tally) end
      else
        redis.call('HSET', runKey, 'state', 'waiting')
        makeDue(base, limitsKey, seqKey, f[1], group, id, f[2], true)
      end
      stalled[#stalled + 1] = id
      stalled[#stalled + 1] = f[1]
      stalled[#stalled + 1] = stalls
      stalled[#stalled + 1] = stalls > tonumber(ARGV[5]) and 0 or 1
    else
      redis.call('ZREM', KEYS_LEASES, id)
    end
  end
  countFinished(base, limitsKey, tally, 'failed', now, tonumber(ARGV[7]))
  wakeCapped(base, limitsKey, freed)
  for _, wf in ipairs(workflows) do
    sweepSchedules(base, wf, now)
    sweepParked(base, wf, now)
  end
  -- A cancel cascade whose caller went away (a crash between its batched calls).
  head[4] = redis.call('ZRANGEBYSCORE', base .. 'cascades', '-inf', now - scanInterval, 'LIMIT', 0, 1)[1] or ''
end

-- 3. Claim.
head[1] = nextDue
local reply = { head }
claimRuns(base, KEYS_LEASES, limitsKey, seqKey, workflows, tonumber(ARGV[2]), now, tonumber(ARGV[3]), reply, true)
rememberClaims(KEYS[2], tonumber(ARGV[3]))
-- Room left under the namespace cap: the workers of workflows it held back are next.
wakeNamespaceWaiters(base, limitsKey)
-- A rate limit that held runs back: come back when its window frees, not before (no polling).
noteHeldGroups(base, limitsKey, workflows)
if rateWakeAt then
  local inMs = math.max(1, rateWakeAt - now)
  if head[1] < 0 or inMs < head[1] then head[1] = inMs end
end
-- A short claim: the caller blocks next, announced parked by this call (ARGV[10]). Not when it
-- is to reserve again at once (nothing due-in of 0 comes but from a replay, which returned above).
local parkMs = tonumber(ARGV[10])
if parkMs > 0 and claimCount < tonumber(ARGV[2]) and head[1] ~= 0 then
  parkWorker(base, ARGV[8], parkMs, workflows, false)
  head[5] = 1
end
return reply
