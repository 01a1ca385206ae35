#!lua
--[[
  signal: deliver a named signal to one run (QueueClient.signal). A run waiting for a signal of
  that name resumes with it (see lua/includes/waits.lua); otherwise the signal goes to the end of
  the run's mailbox, where the run's next wait for that name takes the oldest one (suspend.lua).
  The mailbox holds at most ARGV[5] signals and is dropped when the run finishes.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, waits

  KEYS[1] run:<id>  hash
  KEYS[2] limits    hash
  KEYS[3] seq       string
  KEYS[4], KEYS[5] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  ARGV[3] signal name
  ARGV[4] encoded payload ('' = undefined)
  ARGV[5] mailbox bound
  Reply: { 'delivered' | 'queued' | 'full' | 'missing' | 'finished', the run's state ('' if missing) }
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
-- @include waits

local base, id, name = ARGV[1], ARGV[2], ARGV[3]
local f = redis.call('HMGET', KEYS[1], 'state', 'wait', 'workflow', 'group', 'priority', 'waitRoom')
if not f[1] or not f[3] then return { 'missing', '' } end
if f[1] == 'completed' or f[1] == 'failed' or f[1] == 'cancelled' then return { 'finished', f[1] } end
local envelope = payloadEnvelope(ARGV[4])
if f[1] == 'delayed' and f[2] then
  local kind, _, memoKey, target = parseWait(f[2])
  if kind == 'signal' and target == name then
    resumeWith(base, KEYS[1], id, f, memoKey, envelope)
    return { 'delivered', f[1] }
  end
end
local mailbox = base .. 'mailbox:' .. id
if redis.call('LLEN', mailbox) >= tonumber(ARGV[5]) then return { 'full', f[1] } end
redis.call('RPUSH', mailbox, name .. ' ' .. envelope)
redis.call('HSET', KEYS[1], 'links', 1)
return { 'queued', f[1] }
