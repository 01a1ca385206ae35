#!lua flags=no-writes
--[[
  schedule-list: one page of schedules in id order, with their hashes (a read).

  Includes: none

  KEYS[1] schedules, or wf:<name>:schedules for one workflow's   zset (score 0)
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] cursor: the last id of the previous page, or '' to start
  ARGV[3] page size
  Reply: { next cursor ('' after the last page), { id, field, value, … }, … }
]]
local base = ARGV[1]
local from = '-'
if ARGV[2] ~= '' then from = '(' .. ARGV[2] end
local limit = tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYLEX', KEYS[1], from, '+', 'LIMIT', 0, limit + 1)
local reply = { '' }
if #ids > limit then
  ids[#ids] = nil
  reply[1] = ids[#ids]
end
for _, id in ipairs(ids) do
  local row = redis.call('HGETALL', base .. 'schedule:' .. id)
  if #row > 0 then
    table.insert(row, 1, id)
    reply[#reply + 1] = row
  end
end
return reply
