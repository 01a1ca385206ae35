#!lua flags=allow-oom
--[[
  cancel: end a run that has not finished, as 'cancelled', in one step. A waiting run leaves its
  lane, a delayed one its delayed set; an active run frees every slot it holds (and a fast-path
  handoff no worker took yet is withdrawn), so its lease token no longer holds: its worker's later
  writes are refused. Its waiters are told (done channel, state 'cancelled'), and the workers are
  told on the namespace's cancel channel, so the one running it aborts its signal at once (the
  lease heartbeat notices too, should that message be lost). A finished run is left as it is.
  A run in a durable wait leaves it (waits.lua); one waiting for child workflows cancels them
  too, and theirs in turn (at most MAX_CASCADE runs in all), each recorded and announced as a
  cancelled run of its own.

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
  Reply: { 'cancelled' | 'finished' | 'missing', the state the run was in ('' if missing; a
         durable wait's state, e.g. 'sleeping', for a run in one), children cancelled with it }
]]
-- @include common
-- @include waits

-- Most runs one call cancels: the run and its children, their children… A deeper or wider tree
-- is cut there (the rest finish on their own; their parent no longer waits for them).
local MAX_CASCADE = 10000

local base = ARGV[1]
local now = nowMs()
local freed, tally = {}, {}

-- Cancels one unfinished run; returns the state it was in (a wait's kind, if in one) and the
-- ids of the children it waited for.
local function cancelRun(runKey, id, f)
  local state, workflow, group = f[1], f[2], f[3] or ''
  local shown, children = state, {}
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
    -- A wait that came due but was not claimed yet is still recorded.
    if f[8] then leaveWait(base, runKey, id, workflow, f[8]) end
  elseif state == 'delayed' then
    redis.call('ZREM', wfKey(base, workflow, 'delayed'), id)
    if f[8] then
      local kind, _, _, target = parseWait(f[8])
      shown = WAIT_INDEX[kind]
      if kind == 'child' then
        for child in string.gmatch(target, '%S+') do children[#children + 1] = child end
      end
      leaveWait(base, runKey, id, workflow, f[8])
    end
  elseif state == 'active' then
    releaseSlots(base, KEYS[2], KEYS[3], KEYS[4], id, workflow, group, freed)
    local wakeKey = wfKey(base, workflow, 'wake')
    if redis.call('LLEN', wakeKey) > 0 then redis.call('LREM', wakeKey, 1, handoffEntry(f[5], id, f[6])) end
    publish(base .. 'cancel', id .. ' ' .. f[5] .. ' ' .. ARGV[4])
  end
  finishRun(base, runKey, id, workflow, 'cancelled', 'error', ARGV[3], now, tonumber(ARGV[5]), f[7] == '1', f[9] == '1')
  tallyFinished(tally, workflow, 'cancelled', id)
  return shown, children
end

local FIELDS = { 'state', 'workflow', 'group', 'priority', 'token', 'input', 'waited', 'wait', 'links', 'parent' }
local function unfinished(f)
  return f[1] and f[2] and f[1] ~= 'completed' and f[1] ~= 'failed' and f[1] ~= 'cancelled'
end

local f = redis.call('HMGET', KEYS[1], unpack(FIELDS))
if not f[1] or not f[2] then return { 'missing', '' } end
if not unfinished(f) then return { 'finished', f[1] } end

local shown, children = cancelRun(KEYS[1], ARGV[2], f)
local pending = {}
for _, child in ipairs(children) do pending[#pending + 1] = { child, ARGV[2] } end
local cascaded, visited = 0, 1
local i = 1
while i <= #pending and visited < MAX_CASCADE do
  local id, parent = pending[i][1], pending[i][2]
  i = i + 1
  local runKey = base .. 'run:' .. id
  local c = redis.call('HMGET', runKey, unpack(FIELDS))
  visited = visited + 1
  -- Still this parent's child (not an id reused since by another run).
  if unfinished(c) and c[10] and string.sub(c[10], 1, #parent + 1) == parent .. ' ' then
    local _, grandchildren = cancelRun(runKey, id, c)
    cascaded = cascaded + 1
    for _, grandchild in ipairs(grandchildren) do pending[#pending + 1] = { grandchild, id } end
  end
end
countFinished(base, KEYS[3], tally, now, tonumber(ARGV[5]))
wakeCapped(base, KEYS[3], freed)
return { 'cancelled', shown, cascaded }
