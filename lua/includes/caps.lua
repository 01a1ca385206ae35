-- caps: whether a level has room for one more run (`-- @include caps`).
-- @needs util, lanes, limits, leases, rates
--
-- Room at each level: the namespace counts leases (every claimed run holds one).

local function namespaceRoom(leasesKey, limitsKey)
  local limit = limitOf(limitsKey, 'ns')
  return not limit or activeCount(leasesKey) < limit
end

-- A paused workflow has no room; a rate-limited one has none while its window is full.
local function workflowRoom(base, limitsKey, workflow)
  if controlsOn(limitsKey) then
    if limitOf(limitsKey, 'wf:' .. workflow .. ':paused') then return false end
    local max, perMs = workflowRate(limitsKey, workflow)
    local freeAt = max and rateFreeAt(wfKey(base, workflow, 'rate-log'), max, perMs)
    if freeAt then
      noteRateHold(freeAt)
      return false
    end
  end
  local limit = limitOf(limitsKey, 'wf:' .. workflow)
  return not limit or activeCount(wfKey(base, workflow, 'active')) < limit
end

-- Returns whether the group has room; when its rate limit is what holds it, also when that frees.
local function groupRoom(base, limitsKey, workflow, group)
  local lane = laneOf(base, workflow, group)
  if controlsOn(limitsKey) then
    if limitOf(limitsKey, 'wf:' .. workflow .. ':paused-groups') and limitOf(limitsKey, 'wf:' .. workflow .. ':g:' .. group .. ':paused') then
      return false
    end
    local max, perMs = groupRate(limitsKey, workflow, group)
    local freeAt = max and rateFreeAt(lane .. 'rate-log', max, perMs)
    if freeAt then return false, freeAt end
  end
  local limit = groupLimit(limitsKey, workflow, group)
  return not limit or activeCount(lane .. 'active') < limit
end
