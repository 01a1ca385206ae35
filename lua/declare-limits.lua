--[[
  declare-limits: at a worker's bootstrap, register its workflows and write the fleet-wide caps
  its code declares; report what changed. The latest bootstrap wins.

  KEYS[1] limits     hash
  KEYS[2] workflows  set
  ARGV[1] W, the number of workflow names that follow
  ARGV[2 .. 1+W] workflow names
  ARGV[2+W ..] field, limit, field, limit, … (limit '' = no cap: the field is removed)
  Reply: { field, previous ('' if none), new ('' if none), … } for every field that changed
]]
-- @include common

local workflowCount = tonumber(ARGV[1])
for i = 2, 1 + workflowCount do redis.call('SADD', KEYS[2], ARGV[i]) end

local changed = {}
for i = 2 + workflowCount, #ARGV, 2 do
  local previous = redis.call('HGET', KEYS[1], ARGV[i]) or ''
  if previous ~= ARGV[i + 1] then
    if ARGV[i + 1] == '' then
      redis.call('HDEL', KEYS[1], ARGV[i])
    else
      redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    end
    changed[#changed + 1] = ARGV[i]
    changed[#changed + 1] = previous
    changed[#changed + 1] = ARGV[i + 1]
  end
end
return changed
