--[[
  declare-limits: write the fleet-wide caps a worker's code declares, and report what changed.

  KEYS[1] limits  hash
  ARGV[1..] field, limit, field, limit, … (limit '' = no cap: the field is removed)
  Reply: { field, previous ('' if none), new ('' if none), … } for every field that changed
]]
-- @include common

local changed = {}
for i = 1, #ARGV, 2 do
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
