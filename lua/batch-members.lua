#!lua flags=no-writes
--[[
  batch-members: the members of a batch run (docs/batches.md) that are still to run, with their
  inputs, for the worker that claimed the batch: one read per attempt of a batch. A member that
  left the batch (cancelled while it waited, or its record expired) is left out: its batch runs
  without it.

  Includes: none

  KEYS[1] batch:<batch id>  list: the member ids, in enqueue order
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  Also, named from the key base: each member's record run:<member id>
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] the batch run's id
  Reply: flat, { member id, encoded input, … } in enqueue order
]]

local reply = {}
for _, id in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local f = redis.call('HMGET', ARGV[1] .. 'run:' .. id, 'state', 'batch', 'input')
  if f[1] == 'batched' and f[2] == ARGV[2] then
    reply[#reply + 1] = id
    reply[#reply + 1] = f[3] or ''
  end
end
return reply
