--[[
  set-control: pause or resume a workflow or one of its groups, or set or remove a rate limit,
  fleet-wide (fields of the limits hash, see writeControl in common.lua). Runs claimed from now on
  obey it; active runs carry on. A resume, or a rate limit raised or removed, lets the group it
  concerns rejoin its workflow's round-robin and wakes the workflow's workers (groups a rate limit
  holds in `rate-held` come back when their window frees, as they would have).

  KEYS[1] limits  hash
  KEYS[2] seq     string
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] 'pause' | 'rate'
  ARGV[3] workflow
  ARGV[4] group, or '' for the workflow itself; for 'rate' also '*' (the default of every group)
  ARGV[5] pause: '1' to pause, '' to resume; rate: max starts per window, '' to remove the limit
  ARGV[6] rate: window length in ms ('' with ARGV[5] '')
  Reply: { previous value ('' = none), previous window ('' = none) }
]]
-- @include common

local base, kind, workflow, group, value, windowMs = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local wf = 'wf:' .. workflow
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
end

-- Resumed, or a rate limit changed: what it held back may run now (a tighter limit is only
-- checked at the next claim, so waking then costs one reserve).
if value == '' or kind == 'rate' then afterCapChange(base, KEYS[1], KEYS[2], workflow, group) end
return { previous, previousWindow }
