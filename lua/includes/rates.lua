-- rates: rate limits of workflows and groups (`-- @include rates`).
-- @needs time, util, lanes, limits
--
-- A rate-limited level keeps its recent starts in a list (newest first, at most `max` long, key
-- <level>rate-log): it may start a run unless the max-th newest start is still inside the window.
--
-- A group with due runs held back only by its rate limit waits in the workflow's `rate-held` zset
-- (score = when its window frees) for reserve to bring it back (reserve.lua): nothing else
-- would, since no run of it may finish or arrive meanwhile.

-- The rate limit that holds for a workflow, or for one of its groups (its override, else the
-- default of every group): max starts and window length in ms, or nil.
local function workflowRate(limitsKey, workflow)
  if not controlsOn(limitsKey) then return nil end
  local max = limitOf(limitsKey, 'wf:' .. workflow .. ':rate')
  if max then return max, limitOf(limitsKey, 'wf:' .. workflow .. ':rate-ms') end
  return nil
end

local function groupRate(limitsKey, workflow, group)
  if not controlsOn(limitsKey) then return nil end
  if limitOf(limitsKey, 'wf:' .. workflow .. ':rate-overrides') then
    local max = limitOf(limitsKey, 'wf:' .. workflow .. ':g:' .. group .. ':rate')
    if max then return max, limitOf(limitsKey, 'wf:' .. workflow .. ':g:' .. group .. ':rate-ms') end
  end
  local max = limitOf(limitsKey, 'wf:' .. workflow .. ':group-rate')
  if max then return max, limitOf(limitsKey, 'wf:' .. workflow .. ':group-rate-ms') end
  return nil
end

-- Returns nil if it may start a run, else when it may again (ms). O(1): the list is trimmed to
-- `max`, so its max-th entry is its tail.
local function rateFreeAt(logKey, max, perMs)
  local oldest = redis.call('LINDEX', logKey, max - 1)
  if oldest and tonumber(oldest) + perMs > nowMs() then return tonumber(oldest) + perMs end
  return nil
end

-- The earliest time a rate limit this call met frees (the reserve reply tells the worker to come
-- back then instead of polling), or nil.
local rateWakeAt = nil
local function noteRateHold(freeAt)
  if not rateWakeAt or freeAt < rateWakeAt then rateWakeAt = freeAt end
end

-- Notes the earliest window of the groups the workflows' rate limits hold back (their
-- `rate-held` zsets, see holdForRate): a claim does not look at them, a reserve frees them.
local function noteHeldGroups(base, limitsKey, workflows)
  if not controlsOn(limitsKey) then return end
  for _, wf in ipairs(workflows) do
    local first = redis.call('ZRANGE', wfKey(base, wf, 'rate-held'), 0, 0, 'WITHSCORES')
    if #first > 0 then noteRateHold(tonumber(first[2])) end
  end
end

-- Adds a start (the call's Redis time, the same as the claim's) to a level's rate log.
local function recordStart(logKey, max, perMs)
  redis.call('LPUSH', logKey, nowMs())
  redis.call('LTRIM', logKey, 0, max - 1)
  redis.call('PEXPIRE', logKey, perMs)
end

-- Records one run start at every rate-limited level of a claim.
local function noteStart(base, limitsKey, workflow, group)
  if limitsAbsent or not controlsOn(limitsKey) then return end
  local max, perMs = workflowRate(limitsKey, workflow)
  if max then recordStart(wfKey(base, workflow, 'rate-log'), max, perMs) end
  if group ~= '' then
    max, perMs = groupRate(limitsKey, workflow, group)
    if max then recordStart(laneOf(base, workflow, group) .. 'rate-log', max, perMs) end
  end
end

-- Holds a group back for its rate limit (see the top of this file).
local function holdForRate(base, workflow, group, freeAt)
  redis.call('ZADD', wfKey(base, workflow, 'rate-held'), freeAt, group)
  noteRateHold(freeAt)
end
