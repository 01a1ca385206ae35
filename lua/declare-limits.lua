#!lua
--[[
  declare-limits: at a worker's bootstrap, register its workflows and write the fleet-wide caps
  its code declares; report what changed. The latest bootstrap wins; a raised cap releases what
  the old one held back, as set-limits does, except that for a changed default of every group
  the caller visits the workflow's groups itself, in batches (activate-groups from cursor '0').

  KEYS[1] limits     hash
  KEYS[2] workflows  set
  KEYS[3] seq        string
  KEYS[4], KEYS[5] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] W, the number of workflow names that follow
  ARGV[3 .. 2+W] workflow names
  ARGV[3+W ..] per cap, four values: field, limit ('' = no cap: the field is removed), the
               workflow it concerns ('' = namespace), the group it concerns ('*' = every group, or '')
  Reply: { field, previous ('' if none), new ('' if none), … } for every field that changed
]]
-- @include common

local workflowCount = tonumber(ARGV[2])
for i = 3, 2 + workflowCount do
  redis.call('SADD', KEYS[2], ARGV[i])
  -- A workflow with no group listed has no due grouped run: its count of them (see stats.lua) is
  -- exactly 0 now, which spares a new workflow the one-time count of stats.
  local statsKey = wfKey(ARGV[1], ARGV[i], 'stats')
  if redis.call('HEXISTS', statsKey, 'groupDueExact') == 0 and redis.call('SCARD', wfKey(ARGV[1], ARGV[i], 'groups')) == 0 then
    redis.call('HSET', statsKey, 'groupDue', 0, 'groupDueExact', 1)
  end
end

local changed = {}
for i = 3 + workflowCount, #ARGV, 4 do
  local field, limit = ARGV[i], ARGV[i + 1]
  local previous = redis.call('HGET', KEYS[1], field) or ''
  if previous ~= limit then
    if limit == '' then redis.call('HDEL', KEYS[1], field) else redis.call('HSET', KEYS[1], field, limit) end
    limitCache = {}
    afterCapChange(ARGV[1], KEYS[1], KEYS[3], ARGV[i + 2], ARGV[i + 3])
    changed[#changed + 1] = field
    changed[#changed + 1] = previous
    changed[#changed + 1] = limit
  end
end
return changed
