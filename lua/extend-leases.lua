#!lua
--[[
  extend-leases: the heartbeat of one worker, for all its runs in one call. Pushes each lease
  deadline out by the lease length, if the token still holds it.

  Includes: time, leases

  KEYS[1] leases  zset
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] lease length in ms
  ARGV[3..] run id, lease token, run id, lease token, …
  Reply: { run id, lease token, state, error, … } of the leases this worker no longer holds (the
         token tells a stale attempt from a newer one of the same run in the same process; the
         state, '' if the run is gone, tells a cancelled run from one another worker took over;
         error is a cancelled run's recorded error JSON (its reason: see cancel.lua), else '':
         this heartbeat may find the run cancelled before the cancel channel's message reaches
         the worker, and its signal must carry the same reason either way)
]]
-- @include time
-- @include leases

local deadline = nowMs() + tonumber(ARGV[2])
local lost = {}
for i = 3, #ARGV, 2 do
  if leasedRun(ARGV[1] .. "run:" .. ARGV[i], ARGV[i + 1]) then
    redis.call('ZADD', KEYS[1], 'XX', deadline, ARGV[i])
  else
    lost[#lost + 1] = ARGV[i]
    lost[#lost + 1] = ARGV[i + 1]
    local f = redis.call('HMGET', ARGV[1] .. 'run:' .. ARGV[i], 'state', 'error')
    lost[#lost + 1] = f[1] or ''
    lost[#lost + 1] = f[1] == 'cancelled' and f[2] or ''
  end
end
return lost
