-- slots: freeing the slots a run holds, and waking the workers a full cap left blocked
-- (`-- @include slots`).
-- @needs util, lanes, wakes, limits, leases, groups
--
-- Workflows whose due runs the namespace cap held back: `ns-waiting`, a zset scored by turn
-- (oldest first), written by a claim pass that found the cap full (see claimRuns). A call that
-- leaves room under the cap takes up to that many of them off it (at most NS_WAKE_BATCH) and
-- wakes their workers; each woken worker claims what it can, notes its workflow again if the cap
-- is full once more, and passes the room left on the same way (reserve). So a finishing call
-- costs a few commands however many workflows the namespace has, and a run the namespace cap
-- held back is not stranded: its workflow is in ns-waiting or its wake list has a marker.
-- Uncapped levels never leave a worker blocked with work due.

-- Groups whose slots freed in a call that claims right after (complete sets it to a table):
-- their review waits for the claim, which may fill the slot again at once — sparing the group a
-- trip out of the round-robin and back (see settleGroups).
local deferredGroups = nil

-- Frees the slots a run holds at every level, and notes in `freed` (workflow -> true, or
-- 'rejoined' when a group its cap held back rejoined the round-robin) what wakeCapped must
-- look at. Callers that refill slots themselves call wakeCapped after refilling.
local function releaseSlots(base, leasesKey, limitsKey, seqKey, id, workflow, group, freed)
  removeActive(leasesKey, id)
  removeActive(wfKey(base, workflow, 'active'), id)
  if freed[workflow] == nil then freed[workflow] = true end
  if group ~= '' then
    removeActive(laneOf(base, workflow, group) .. 'active', id)
    if deferredGroups then
      deferredGroups[workflow] = deferredGroups[workflow] or {}
      deferredGroups[workflow][group] = true
    elseif reviewGroup(base, limitsKey, seqKey, workflow, group) then
      freed[workflow] = 'rejoined'
    end
  end
end

local NS_WAKE_BATCH = 8
local function wakeNamespaceWaiters(base, limitsKey)
  local limit = limitOf(limitsKey, 'ns')
  if not limit then return end
  local room = limit - activeCount(KEYS_LEASES)
  if room <= 0 then return end
  local popped = redis.call('ZPOPMIN', base .. 'ns-waiting', math.min(room, NS_WAKE_BATCH))
  for i = 1, #popped, 2 do
    if hasDue(base, popped[i]) then wake(wfKey(base, popped[i], 'wake')) end
  end
end

-- Wakes the workers a full cap may have left blocked although runs are due: those of the
-- workflows in `freed` that are capped or had a group rejoin, and those the namespace cap held
-- back (wakeNamespaceWaiters).
local function wakeCapped(base, limitsKey, freed)
  wakeNamespaceWaiters(base, limitsKey)
  for wf, how in pairs(freed) do
    if (how == 'rejoined' or limitOf(limitsKey, 'wf:' .. wf)) and hasDue(base, wf) then
      wake(wfKey(base, wf, 'wake'))
    end
  end
end
