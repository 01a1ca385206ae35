#!lua
--[[
  set-control: pause or resume a workflow or one of its groups, or set or remove a rate limit,
  fleet-wide (fields of the limits hash, see writeControl in limits.lua). Runs claimed from now on
  obey it; active runs carry on. A resume, or a rate limit raised or removed, lets the group it
  concerns rejoin its workflow's round-robin and wakes the workflow's workers; a rate limit raised
  or removed starts a review of every group of the workflow held in `rate-held` (see
  startRateReview in rate-reviews.lua: resumable, and finished by the workflow's reserves if the caller
  stops part-way); an application's call removing a limit already gone does too while no group
  rate limit is left to hold one.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, rate-reviews, origins

  KEYS[1] limits  hash
  KEYS[2] seq     string
  KEYS[3], KEYS[4] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] 'pause' | 'rate' | 'rate-review' (only the next batch of the review, below)
  ARGV[3] workflow
  ARGV[4] group, or '' for the workflow itself; for 'rate' also '*' (the default of every group)
  ARGV[5] pause: '1' to pause, '' to resume; rate: max starts per window, '' to remove the limit
  ARGV[6] rate: window length in ms ('' with ARGV[5] '')
  ARGV[7] rate of a workflow or every group's default: 'code' when a worker bootstrap declares it,
          else '' (an application's call: recorded, with the declaration it overrides, in
          '<base>runtime-limits', includes/origins.lua). A bootstrap leaves an operator's value
          while its code declares what that value overrode, and looks at no keys for nothing (it
          writes every limit its code declares at each start).
  Reply: { previous value ('' = none), previous window ('' = none), groups left to review in
         rate-review (the caller goes on with 'rate-review' while it is > 0; the workflow's
         reserves do too), 'kept' if a bootstrap left an operator's value (nothing written;
         previous = the value in force), 'dropped' if it replaced one, else '' }
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
-- @include origins

local base, kind, workflow, group, value, windowMs = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local wf = 'wf:' .. workflow

-- Groups one call reviews (see reviewRateHeld). Bounded, as a workflow may have any number of groups.
local REVIEW_BATCH = 500

-- Who sets a workflow's or every group's default rate limit; a bootstrap may have to leave it.
local byCode, originField, overridden, outcome = ARGV[7] == 'code', nil, false, ''
local function rateText(max, ms) return max == '' and '' or max .. '/' .. ms end
if kind == 'rate' and (group == '' or group == '*') then
  originField = wf .. (group == '' and ':rate' or ':group-rate')
  overridden = overriddenDeclaration(base, originField)
  if byCode then outcome = declarationOutcome(overridden, rateText(value, windowMs)) end
  if outcome == 'kept' then
    local current = redis.call('HMGET', KEYS[1], originField, originField .. '-ms')
    return { current[1] or '', current[2] or '', 0, 'kept' }
  end
end

-- A bootstrap declaring no rate limit where none is set and no review is under way (every
-- boot of a workflow without one): nothing to write, nothing held back to wake for.
if originField and byCode and value == '' and overridden == false then
  local current = redis.call('HMGET', KEYS[1], originField, originField .. '-ms', wf .. ':rate-review')
  if not current[1] and not current[2] and not current[3] then return { '', '', 0, '' } end
end

if kind == 'rate-review' then
  local left = reviewRateHeld(base, KEYS[1], KEYS[2], workflow, REVIEW_BATCH)
  if left > 0 or hasDue(base, workflow) then wake(wfKey(base, workflow, 'wake')) end
  return { '', '', left }
end

local previous, previousWindow = '', ''
if kind == 'pause' then
  if group == '' then
    previous = writeControl(KEYS[1], wf .. ':paused', value, { 'controls' })
  else
    previous = writeControl(KEYS[1], wf .. ':g:' .. group .. ':paused', value, { 'controls', wf .. ':paused-groups' })
  end
else
  local field, counters = wf .. ':rate', { 'controls' }
  if group == '*' then
    field = wf .. ':group-rate'
  elseif group ~= '' then
    field, counters = wf .. ':g:' .. group .. ':rate', { 'controls', wf .. ':rate-overrides' }
  end
  previousWindow = redis.call('HGET', KEYS[1], field .. '-ms') or ''
  previous = writeControl(KEYS[1], field, value, counters)
  if windowMs == '' then redis.call('HDEL', KEYS[1], field .. '-ms') else redis.call('HSET', KEYS[1], field .. '-ms', windowMs) end
  if originField then recordSetter(base, originField, byCode, overridden, rateText(previous, previousWindow), rateText(value, windowMs)) end
end

-- A rate limit raised or removed: the groups it held back are reviewed now rather than when their
-- old window frees. A tighter limit reviews nothing, nor does an unchanged one (every bootstrap
-- writes the limits again) — except an application's removal while no group rate limit of the
-- workflow is left: nothing can hold a group then, so any group still held (a review of an older
-- version stopped part-way) goes back now. A review under way goes on with this call's batch,
-- whatever the change (its flag is read with the limits: a bootstrap pays nothing for it).
local left = 0
if kind == 'rate' then
  local changed = previous ~= value or previousWindow ~= windowMs
  local tighter = changed and value ~= '' and previous ~= '' and tonumber(value) <= tonumber(previous) and tonumber(windowMs) >= tonumber(previousWindow)
  local noneLeft = not byCode and value == '' and not limitOf(KEYS[1], wf .. ':group-rate') and not limitOf(KEYS[1], wf .. ':rate-overrides')
  if (changed and not tighter) or noneLeft then startRateReview(base, KEYS[1], workflow) end
  if limitOf(KEYS[1], wf .. ':rate-review') then left = reviewRateHeld(base, KEYS[1], KEYS[2], workflow, REVIEW_BATCH) end
  -- Groups left to review: a reserve goes on with them, even if this caller stops here.
  if left > 0 then wake(wfKey(base, workflow, 'wake')) end
end
-- Resumed, or a rate limit changed: what it held back may run now (a tighter limit is only
-- checked at the next claim, so waking then costs one reserve).
if value == '' or kind == 'rate' then afterCapChange(base, KEYS[1], KEYS[2], workflow, group) end
return { previous, previousWindow, left, outcome }
