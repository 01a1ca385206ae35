#!lua
--[[
  set-control: pause or resume a workflow or one of its groups, or set or remove a rate limit,
  fleet-wide (fields of the limits hash, see writeControl in common.lua). Runs claimed from now on
  obey it; active runs carry on. A resume, or a rate limit raised or removed, lets the group it
  concerns rejoin its workflow's round-robin and wakes the workflow's workers; a changed rate limit
  reviews every group of the workflow held in `rate-held` at once.

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
          else '' (an operator's: recorded, with the declaration it overrides, in
          '<base>runtime-limits', includes/origins.lua). A bootstrap leaves an operator's value
          while its code declares what that value overrode.
  Reply: { previous value ('' = none), previous window ('' = none), groups left in rate-held to
         review (the caller goes on with 'rate-review' while it is > 0), 'kept' if a bootstrap left
         an operator's value (nothing written; previous = the value in force), 'dropped' if it
         replaced one, else '' }
]]
-- @include common
-- @include origins

local base, kind, workflow, group, value, windowMs = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local wf = 'wf:' .. workflow
local heldKey = wfKey(base, workflow, 'rate-held')

-- Brings back the next REVIEW_BATCH groups a rate limit held (each stays held if it still has no
-- room); returns how many are left. Bounded, as a workflow may have any number of groups.
local REVIEW_BATCH = 500
local function reviewHeld()
  local held = redis.call('ZRANGE', heldKey, 0, REVIEW_BATCH - 1)
  if #held > 0 then
    redis.call('ZREM', heldKey, unpack(held))
    for _, g in ipairs(held) do activateGroup(base, KEYS[1], KEYS[2], workflow, g) end
  end
  return redis.call('ZCARD', heldKey)
end

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

if kind == 'rate-review' then
  local left = reviewHeld()
  if hasDue(base, workflow) then wake(wfKey(base, workflow, 'wake')) end
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
-- old window frees — and must be, once the namespace has no control left, as reserve then no
-- longer looks at rate-held. An unchanged limit (every bootstrap) or a tighter one reviews nothing.
local left = 0
if kind == 'rate' and (previous ~= value or previousWindow ~= windowMs) then
  local tighter = value ~= '' and previous ~= '' and tonumber(value) <= tonumber(previous) and tonumber(windowMs) >= tonumber(previousWindow)
  if not tighter then left = reviewHeld() end
end
-- Resumed, or a rate limit changed: what it held back may run now (a tighter limit is only
-- checked at the next claim, so waking then costs one reserve).
if value == '' or kind == 'rate' then afterCapChange(base, KEYS[1], KEYS[2], workflow, group) end
return { previous, previousWindow, left, outcome }
