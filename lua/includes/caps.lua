-- caps: whether a level has room for one more run (`-- @include caps`).
-- @needs util, lanes, limits, leases, rates
--
-- Room at each level: the namespace counts leases (every claimed run holds one). Without a
-- limits hash (limitsAbsent, see limits.lua) no level has a cap or a control: a claim pass asks
-- these per claim, so they answer that first, without a look-up.

local function namespaceRoom(leasesKey, limitsKey)
  if limitsAbsent then return true end
  local limit = limitOf(limitsKey, 'ns')
  return not limit or activeCount(leasesKey) < limit
end

-- A paused workflow has no room; a rate-limited one has none while its window is full.
local function workflowRoom(base, limitsKey, workflow)
  if limitsAbsent then return true end
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

-- How many more runs the namespace's and the workflow's caps allow (math.huge for none): how far
-- ahead a claim may pop the workflow's ungrouped lane (see popDue). Rate limits are checked per
-- claim; what they leave unclaimed goes back (restorePopped).
local function capsLeft(base, leasesKey, limitsKey, workflow)
  local left = math.huge
  if limitsAbsent then return left end
  local ns = limitOf(limitsKey, 'ns')
  if ns then left = ns - activeCount(leasesKey) end
  local wf = limitOf(limitsKey, 'wf:' .. workflow)
  if wf then left = math.min(left, wf - activeCount(wfKey(base, workflow, 'active'))) end
  return left
end

-- How many more runs a group's cap allows (math.huge for none).
local function groupLeft(base, limitsKey, workflow, group)
  local limit = groupLimit(limitsKey, workflow, group)
  if not limit then return math.huge end
  return limit - activeCount(laneOf(base, workflow, group) .. 'active')
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
  return groupLeft(base, limitsKey, workflow, group) > 0
end
