-- claim-pass: one call's claims, fairly over workflows and groups (`-- @include claim-pass`).
-- @needs util, lanes, wakes, limits, leases, rates, caps, groups, slots, claim
--
-- The group round-robin of one call. The `ready` zset orders a workflow's runnable groups by turn;
-- a call reads its head once (up to 64 groups) and cycles through that ring locally, one run per
-- group per turn, then writes the outcome back once (settleGroups): groups that ran dry or hit their
-- cap leave `ready` (activateGroup brings them back), groups served go to the back in the order they
-- were last served. Groups past the first 64 wait a call. Writes to the rings set claimPassDirty.
local claimPassDirty = false
local rings = {}

local function newRing(groups)
  return { groups = groups, pos = 0, out = {}, served = {}, order = 0, pending = {}, taken = 0, held = {} }
end
-- The ring of every workflow found dry (see claimRuns): no groups, nothing taken, never written.
local DRY_RING = newRing({})

local function ringOf(base, workflow)
  local ring = rings[workflow]
  if not ring then
    ring = newRing(redis.call('ZRANGE', wfKey(base, workflow, 'ready'), 0, 63))
    -- Groups whose slots this call freed take their turn after the ones already waiting.
    local known = {}
    for _, group in ipairs(ring.groups) do known[group] = true end
    local readyKey = wfKey(base, workflow, 'ready')
    for group in pairs(deferredGroups and deferredGroups[workflow] or {}) do
      -- One already further back in `ready` keeps its place: its turn comes in a later call.
      if not known[group] and not redis.call('ZSCORE', readyKey, group) then
        ring.groups[#ring.groups + 1] = group
        ring.pending[group] = true
      end
    end
    rings[workflow], claimPassDirty = ring, true
  end
  return ring
end

-- Pops the next run of the workflow's groups, in round-robin. Returns id, group — or nil when
-- no group of the ring can give a run. `remaining`: the claims the call may still make; a group
-- lane is popped ahead for its share of them, within its cap (see popDue).
local function popFromGroups(base, limitsKey, workflow, remaining)
  local ring = ringOf(base, workflow)
  local size = #ring.groups
  for _ = 1, size do
    ring.pos = ring.pos % size + 1
    local group = ring.groups[ring.pos]
    if not ring.out[group] then
      local lane = laneOf(base, workflow, group)
      local room, freeAt = groupRoom(base, limitsKey, workflow, group)
      local id = room and popDue(lane, math.min(math.ceil(remaining / size), groupLeft(base, limitsKey, workflow, group)))
      if freeAt then ring.held[group] = freeAt end
      if id then
        ring.taken = ring.taken + 1 -- off the workflow's count of due grouped runs, once per call (settleGroups)
        ring.order = ring.order + 1
        ring.served[group] = ring.order
        return id, group
      end
      ring.out[group] = true
    end
  end
  return nil
end

local NO_GROUPS = {}
-- A ring's groups back in `ready`: those served to the back in serving order, those out leave it.
local function settleRing(base, limitsKey, workflow, ring, freed)
  local readyKey = wfKey(base, workflow, 'ready')
  local served = {}
  for _, group in ipairs(ring.groups) do
    local lane = laneOf(base, workflow, group)
    if ring.out[group] then
      redis.call('ZREM', readyKey, group)
      -- Held back by its rate limit with runs due: reserve brings it back when the window frees.
      if ring.held[group] and laneHasDue(lane) then holdForRate(base, workflow, group, ring.held[group]) end
    elseif ring.served[group] or ring.pending[group] then
      local room, freeAt = groupRoom(base, limitsKey, workflow, group)
      local due = (room or freeAt) and laneHasDue(lane)
      if room and due then
        served[#served + 1] = group
      else
        redis.call('ZREM', readyKey, group)
        if freeAt and due then holdForRate(base, workflow, group, freeAt) end
      end
    end
  end
  -- Served groups go to the back in the order they were served; pending ones nobody served after them.
  table.sort(served, function(a, b) return (ring.served[a] or math.huge) < (ring.served[b] or math.huge) end)
  for _, group in ipairs(served) do
    redis.call('ZADD', readyKey, nextTurn(base), group)
    if ring.pending[group] then freed[workflow] = 'rejoined' end
  end
end

-- Writes each ring's outcome back to its workflow's `ready` zset and the runs it took off the
-- workflow's count of due grouped runs (see makeDue), then reviews the deferred groups (see
-- releaseSlots): a group that can run again is in `ready`, one that is idle has left the list of
-- groups. Marks in `freed` the workflows a group rejoined (for wakeCapped).
local function settleGroups(base, limitsKey, seqKey, freed)
  for workflow, ring in pairs(rings) do
    if ring.taken > 0 then redis.call('HINCRBY', wfKey(base, workflow, 'stats'), 'groupDue', -ring.taken) end
    -- A ring of no groups (a workflow without any, or found dry) has nothing to settle.
    if #ring.groups > 0 then settleRing(base, limitsKey, workflow, ring, freed) end
  end
  for workflow, groups in pairs(deferredGroups or NO_GROUPS) do
    local ring = rings[workflow]
    for group in pairs(groups) do
      if ring and (ring.out[group] or ring.served[group] or ring.pending[group]) then
        local lane = laneOf(base, workflow, group)
        if not laneHasDue(lane) and activeCount(lane .. 'active') == 0 then
          redis.call('SREM', wfKey(base, workflow, 'groups'), group)
        end
      elseif reviewGroup(base, limitsKey, seqKey, workflow, group) then
        freed[workflow] = 'rejoined'
      end
    end
  end
  if next(rings) ~= nil then rings = {} end
  deferredGroups = nil
end

-- One claim of claimRuns' pass from `wf` (the i-th workflow) of at most `remaining`. Returns
-- whether the workflow gave a run, and whether its claim was taken (see claimRun).
local function claimOne(base, leasesKey, limitsKey, wf, i, groupTurn, remaining, now, lockMs, reply)
  if not workflowRoom(base, limitsKey, wf) then return false, false end
  local lane = laneOf(base, wf, '')
  local id, group
  -- The workflow's ungrouped lane may give every claim still to make, within its caps (the rest go back).
  local want = math.min(remaining, capsLeft(base, leasesKey, limitsKey, wf))
  if groupTurn[i] then
    id, group = popFromGroups(base, limitsKey, wf, remaining)
    if not id then id, group = popDue(lane, want), '' end
  else
    id, group = popDue(lane, want), ''
    if not id then id, group = popFromGroups(base, limitsKey, wf, remaining) end
  end
  if not id then return false, false end
  groupTurn[i] = group == ''
  if not claimRun(base, leasesKey, id, wf, group, now, lockMs, reply) then return true, false end
  noteStart(base, limitsKey, wf, group)
  return true, true
end

-- Claims up to maxClaims due runs, fairly: round-robin over `workflows`, one run per workflow per
-- pass; within a workflow, its ungrouped runs and its runnable groups take turns. Every cap —
-- namespace, workflow, group — is checked for each claim. With passWake, if the batch filled up
-- while runs are still claimable, passes the wake marker on to the next idle worker. `wet`: the
-- workflow the caller found something due in, after its last write (see complete.lua), or nil.
local function claimRuns(base, leasesKey, limitsKey, seqKey, workflows, maxClaims, now, lockMs, reply, passWake, freed, wet)
  local claimed = 0
  local open, groupTurn = {}, {}
  for i, wf in ipairs(workflows) do
    open[i] = true
    -- Nothing due at all (an idle worker's refill, most often): one look at every key a claim
    -- would take from (empty lists and zsets do not exist) spares the look-ups that would find
    -- them empty, one per key. Not for a workflow with groups this call freed a slot of (they may
    -- rejoin, see ringOf), nor for the one the caller looked at.
    local dry = false
    if maxClaims > 0 and wf ~= wet and not (deferredGroups and deferredGroups[wf]) then
      local lane = laneOf(base, wf, '')
      dry = redis.call('EXISTS', lane .. 'queue', lane .. 'waiting', wfKey(base, wf, 'wake'), wfKey(base, wf, 'ready')) == 0
      if dry then
        noPriorities[lane], dryLanes[lane], lanesDirty = true, true, true
        rings[wf], claimPassDirty = DRY_RING, true
        open[i] = false -- nothing to take: the pass below skips its caps and lanes
      end
    end
    if claimed < maxClaims and not dry and takeHandoff(base, leasesKey, wf, now, lockMs, reply) then claimed = claimed + 1 end
  end

  local progress = true
  while progress and claimed < maxClaims and replyBytes < MAX_REPLY_BYTES and namespaceRoom(leasesKey, limitsKey) do
    progress = false
    for i, wf in ipairs(workflows) do
      if open[i] and claimed < maxClaims and replyBytes < MAX_REPLY_BYTES and namespaceRoom(leasesKey, limitsKey) then
        local took
        open[i], took = claimOne(base, leasesKey, limitsKey, wf, i, groupTurn, maxClaims - claimed, now, lockMs, reply)
        if took then claimed = claimed + 1 end
        progress = progress or open[i]
      end
    end
  end
  restorePopped()
  settleGroups(base, limitsKey, seqKey, freed or {})
  -- Stopped short by the namespace cap with runs still due: these workflows wait for a slot freed
  -- anywhere in the namespace (wakeNamespaceWaiters). Not when the caller's own slots ran out: it
  -- comes back by itself (a full batch, or its next completion).
  if claimed < maxClaims and limitOf(limitsKey, 'ns') and not namespaceRoom(leasesKey, limitsKey) then
    for i, wf in ipairs(workflows) do
      if open[i] and hasDue(base, wf) then redis.call('ZADD', base .. 'ns-waiting', 'NX', nextTurn(base), wf) end
    end
  end
  -- A batch cut short by the reply budget is a full batch too: its worker must come back at once.
  local full = claimed >= maxClaims or replyBytes >= MAX_REPLY_BYTES
  if passWake and full and maxClaims > 0 and namespaceRoom(leasesKey, limitsKey) then
    for i, wf in ipairs(workflows) do
      if open[i] and workflowRoom(base, limitsKey, wf) and hasDue(base, wf) then wake(wfKey(base, wf, 'wake')) end
    end
  end
  return claimed
end
