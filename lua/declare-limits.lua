#!lua
--[[
  declare-limits: at a worker's bootstrap, register its workflows and write the fleet-wide caps
  its code declares; report what changed. Among declarations the latest bootstrap wins; a value
  an operator set at runtime stays while the code still declares what it overrode, and gives way
  (its record dropped) to a different declaration (see includes/origins.lua). A raised cap
  releases what the old one held back, as set-limits does, except that for a changed default of
  every group the caller visits the workflow's groups itself, in batches (activate-groups from
  cursor '0').

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, origins

  KEYS[1] limits     hash
  KEYS[2] workflows  set
  KEYS[3] seq        string
  KEYS[4], KEYS[5] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  Also '<base>runtime-limits' (hash, includes/origins.lua), in the same slot.
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] W, the number of workflow names that follow
  ARGV[3 .. 2+W] workflow names
  ARGV[3+W ..] per cap, four values: field, limit ('' = no cap: the field is removed), the
               workflow it concerns ('' = namespace), the group it concerns ('*' = every group, or '')
  Reply: { field, previous ('' if none), new ('' if none), outcome, declared, … } for every field
         that changed or holds a runtime value: outcome '' (the code's value written), 'dropped' (a
         runtime value replaced by a changed declaration) or 'kept' (a runtime value left as it is:
         previous = new = that value); declared = the limit the code declares
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

local base = ARGV[1]
local workflowCount = tonumber(ARGV[2])

-- Every read and decision first: each hash's fields in one HMGET (a worker's boot declares
-- seven fields per workflow).
local fields = {}
for i = 3 + workflowCount, #ARGV, 4 do fields[#fields + 1] = ARGV[i] end
-- In chunks of 500 fields: Lua's unpack is bounded.
local function readAll(key)
  local values = {}
  for i = 1, #fields, 500 do
    local last = math.min(i + 499, #fields)
    local chunk = redis.call('HMGET', key, unpack(fields, i, last))
    for k = 1, last - i + 1 do values[i + k - 1] = chunk[k] end
  end
  return values
end
local overrides, previous = readAll(runtimeLimitsKey(base)), readAll(KEYS[1])
local caps = {}
for n, field in ipairs(fields) do
  local i = 3 + workflowCount + 4 * (n - 1)
  local limit, overridden = ARGV[i + 1], overrides[n] or false
  caps[#caps + 1] = { field = field, limit = limit, workflow = ARGV[i + 2], group = ARGV[i + 3], overridden = overridden,
    previous = previous[n] or '', outcome = declarationOutcome(overridden, limit) }
end

for i = 3, 2 + workflowCount do
  redis.call('SADD', KEYS[2], ARGV[i])
  -- A workflow with no group listed has no due grouped run: its count of them (see stats.lua) is
  -- exactly 0 now, which spares a new workflow the one-time count of stats.
  local statsKey = wfKey(base, ARGV[i], 'stats')
  if redis.call('HEXISTS', statsKey, 'groupDueExact') == 0 and redis.call('SCARD', wfKey(base, ARGV[i], 'groups')) == 0 then
    redis.call('HSET', statsKey, 'groupDue', 0, 'groupDueExact', 1)
  end
end

local changed = {}
for _, cap in ipairs(caps) do
  if cap.outcome == 'kept' then
    for _, v in ipairs({ cap.field, cap.previous, cap.previous, 'kept', cap.limit }) do changed[#changed + 1] = v end
  else
    if cap.outcome == 'dropped' then recordSetter(base, cap.field, true, cap.overridden, cap.previous, cap.limit) end
    if cap.previous ~= cap.limit then
      if cap.limit == '' then redis.call('HDEL', KEYS[1], cap.field) else redis.call('HSET', KEYS[1], cap.field, cap.limit) end
      forgetLimits()
      afterCapChange(base, KEYS[1], KEYS[3], cap.workflow, cap.group)
    end
    if cap.previous ~= cap.limit or cap.outcome == 'dropped' then
      for _, v in ipairs({ cap.field, cap.previous, cap.limit, cap.outcome, cap.limit }) do changed[#changed + 1] = v end
    end
  end
end
return changed
