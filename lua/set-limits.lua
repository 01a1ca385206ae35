#!lua
--[[
  set-limits: change one fleet-wide cap at runtime. Runs claimed from now on obey it; runs
  already active keep their slots. A raised or removed cap lets held-back groups rejoin their
  workflow's round-robin and wakes the workers it concerns. For every group's default ('*'),
  this call visits the first batch of the workflow's groups; the caller goes on with
  activate-groups from the cursor replied, until it is '0'. A cap code can declare (namespace,
  workflow, every group's default) is recorded as set at runtime, with the declaration it
  overrides, so worker bootstraps leave it alone until the code changes (includes/origins.lua).

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, origins

  KEYS[1] limits  hash
  KEYS[2] seq     string
  KEYS[3], KEYS[4] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  Also '<base>runtime-limits' (hash, includes/origins.lua), in the same slot.
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] field: 'ns' | 'wf:<name>' | 'wf:<name>:group' (every group's default) | 'wf:<name>:g:<group>'
          (a group override; 'wf:<name>:overrides' counts them)
  ARGV[3] the cap, or '' to remove it
  ARGV[4] workflow the field concerns, or '' for the namespace
  ARGV[5] group the field concerns, '*' for every group of the workflow, or ''
  Reply: { the previous cap or '' if there was none, SSCAN cursor of the groups left to visit
           ('0' = none) }
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
-- @include origins

local group = ARGV[5]
local previous = redis.call('HGET', KEYS[1], ARGV[2]) or ''
-- A group's own override is never declared by code: it needs no record.
local declarable = group == '' or group == '*'
local overridden = declarable and overriddenDeclaration(ARGV[1], ARGV[2])
if declarable then recordSetter(ARGV[1], ARGV[2], false, overridden, previous, ARGV[3]) end
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], ARGV[2]) else redis.call('HSET', KEYS[1], ARGV[2], ARGV[3]) end

-- Keep the count of the workflow's group overrides (read by groupLimit) in step.
if group ~= '' and group ~= '*' and (previous == '') ~= (ARGV[3] == '') then
  local countField = 'wf:' .. ARGV[4] .. ':overrides'
  if redis.call('HINCRBY', KEYS[1], countField, previous == '' and 1 or -1) <= 0 then redis.call('HDEL', KEYS[1], countField) end
end

-- A lowered default gives no group room, so no group needs a visit. An unchanged one does get
-- its visits: setting a cap again finishes the batches of an earlier change that stopped early.
local cursor = '0'
local lowered = ARGV[3] ~= '' and (previous == '' or tonumber(ARGV[3]) < tonumber(previous))
if group == '*' and not lowered then cursor = activateGroupBatch(ARGV[1], KEYS[1], KEYS[2], ARGV[4], '0') end
afterCapChange(ARGV[1], KEYS[1], KEYS[2], ARGV[4], group)
return { previous, cursor }
