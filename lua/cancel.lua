#!lua flags=allow-oom
--[[
  cancel: end a run that has not finished, as 'cancelled', in one step. A waiting run leaves its
  lane, a delayed one its delayed set; an active run frees every slot it holds (and a fast-path
  handoff no worker took yet is withdrawn), so its lease token no longer holds: its worker's later
  writes are refused. Its waiters are told (done channel, state 'cancelled'), and the workers are
  told on the namespace's cancel channel, so the one running it aborts its signal at once (the
  lease heartbeat notices too, should that message be lost). A finished run is left as it is.

  KEYS[1] run:<id>  hash
  KEYS[2] leases    zset
  KEYS[3] limits    hash
  KEYS[4] seq       string
  KEYS[5], KEYS[6] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  ARGV[3] the error recorded, as JSON { name, message, reason? }
  ARGV[4] the reason given, or '' (for the workers' message)
  ARGV[5] retention in ms
  Reply: { 'cancelled' | 'finished' | 'missing', the state the run was in ('' if missing) }
]]
-- @include common

local base, id = ARGV[1], ARGV[2]
local f = redis.call('HMGET', KEYS[1], 'state', 'workflow', 'group', 'priority', 'token', 'input', 'waited')
local state, workflow, group = f[1], f[2], f[3] or ''
if not state or not workflow then return { 'missing', '' } end
if state == 'completed' or state == 'failed' or state == 'cancelled' then return { 'finished', state } end

local freed = {}
if state == 'waiting' then
  local lane = laneOf(base, workflow, group)
  local removed
  if tonumber(f[4] or 0) == 0 then removed = redis.call('LREM', lane .. 'queue', 1, id) else removed = redis.call('ZREM', lane .. 'waiting', id) end
  if group ~= '' then
    if removed > 0 then redis.call('HINCRBY', wfKey(base, workflow, 'stats'), 'groupDue', -1) end
    -- A group left with nothing due leaves the round-robin (and, if idle, the list of groups).
    if not laneHasDue(lane) then redis.call('ZREM', wfKey(base, workflow, 'ready'), group) end
    reviewGroup(base, KEYS[3], KEYS[4], workflow, group)
  end
elseif state == 'delayed' then
  redis.call('ZREM', wfKey(base, workflow, 'delayed'), id)
elseif state == 'active' then
  releaseSlots(base, KEYS[2], KEYS[3], KEYS[4], id, workflow, group, freed)
  local wakeKey = wfKey(base, workflow, 'wake')
  if redis.call('LLEN', wakeKey) > 0 then redis.call('LREM', wakeKey, 1, handoffEntry(f[5], id, f[6])) end
  publish(base .. 'cancel', id .. ' ' .. f[5] .. ' ' .. ARGV[4])
end

local now = nowMs()
finishRun(base, KEYS[1], id, workflow, 'cancelled', 'error', ARGV[3], now, tonumber(ARGV[5]), f[7] == '1')
local tally = {}
tallyFinished(tally, workflow, 'cancelled', id)
countFinished(base, KEYS[3], tally, now, tonumber(ARGV[5]))
wakeCapped(base, KEYS[3], freed)
return { 'cancelled', state }
