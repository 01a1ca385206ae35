--[[
  set-limits: change one fleet-wide cap at runtime. Runs claimed from now on obey it; runs
  already active keep their slots. A raised or removed cap lets held-back groups rejoin their
  workflow's round-robin and wakes the workers it concerns.

  KEYS[1] limits  hash
  KEYS[2] seq     string
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] field: 'ns' | 'wf:<name>' | 'wf:<name>:group' (every group's default) | 'wf:<name>:g:<group>'
  ARGV[3] the cap, or '' to remove it
  ARGV[4] workflow the field concerns, or '' for the namespace
  ARGV[5] group the field concerns, '*' for every group of the workflow, or ''
  Reply: the previous cap, or '' if there was none
]]
-- @include common

local base, field, workflow, group = ARGV[1], ARGV[2], ARGV[4], ARGV[5]
local previous = redis.call('HGET', KEYS[1], field) or ''
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], field) else redis.call('HSET', KEYS[1], field, ARGV[3]) end

local workflows = { workflow }
if workflow == '' then workflows = redis.call('SMEMBERS', base .. 'workflows') end
for _, wf in ipairs(workflows) do
  local groups = { group }
  if group == '*' then groups = redis.call('SMEMBERS', wfKey(base, wf, 'groups')) end
  if group ~= '' then
    for _, g in ipairs(groups) do activateGroup(base, KEYS[1], KEYS[2], wf, g) end
  end
  if hasDue(base, wf) then wake(wfKey(base, wf, 'wake')) end
end
return previous
