--[[
  set-limits: change one fleet-wide cap at runtime. Runs claimed from now on obey it; runs
  already active keep their slots. A raised or removed cap lets held-back groups rejoin their
  workflow's round-robin and wakes the workers it concerns.

  KEYS[1] limits  hash
  KEYS[2] seq     string
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] field: 'ns' | 'wf:<name>' | 'wf:<name>:group' (every group's default) | 'wf:<name>:g:<group>'
          (a group override; 'wf:<name>:overrides' counts them)
  ARGV[3] the cap, or '' to remove it
  ARGV[4] workflow the field concerns, or '' for the namespace
  ARGV[5] group the field concerns, '*' for every group of the workflow, or ''
  Reply: the previous cap, or '' if there was none
]]
-- @include common

local previous = redis.call('HGET', KEYS[1], ARGV[2]) or ''
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], ARGV[2]) else redis.call('HSET', KEYS[1], ARGV[2], ARGV[3]) end

-- Keep the count of the workflow's group overrides (read by groupLimit) in step.
local group = ARGV[5]
if group ~= '' and group ~= '*' and (previous == '') ~= (ARGV[3] == '') then
  local countField = 'wf:' .. ARGV[4] .. ':overrides'
  if redis.call('HINCRBY', KEYS[1], countField, previous == '' and 1 or -1) <= 0 then redis.call('HDEL', KEYS[1], countField) end
end
afterCapChange(ARGV[1], KEYS[1], KEYS[2], ARGV[4], ARGV[5])
return previous
