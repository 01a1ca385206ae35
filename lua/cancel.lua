#!lua flags=allow-oom
--[[
  cancel: end a run that has not finished, as 'cancelled', in one step. A waiting run leaves its
  lane, a delayed one its delayed set; an active run frees every slot it holds (and a fast-path
  handoff no worker took yet is withdrawn), so its lease token no longer holds: its worker's later
  writes are refused. Its waiters are told (done channel, state 'cancelled'), and the workers are
  told on the namespace's cancel channel, so the one running it aborts its signal at once (the
  lease heartbeat notices too, should that message be lost). A finished run is left as it is.
  A batch run (field 'batchOf', docs/batches.md) ends with its members still in it; a member
  ('batched') ends alone, and its batch runs without it.
  A run in a durable wait leaves it (waits.lua); one waiting for child workflows cancels them
  too, and theirs in turn, each recorded and announced as a cancelled run of its own, with the
  error of the run that waited for it.

  The cascade is batched, so no call blocks Redis for long whatever the tree: a call visits at
  most ARGV[6] runs (the run itself included). The children still to visit wait in the run's
  cascade list ('<parent id> <child id>' entries, breadth first) and the run in the cascades
  zset (score = when its cascade last moved); the caller calls again with the same arguments
  until the reply says none are left (lib/client/run.control.ts). A cascade whose caller went
  away is finished by a worker (a stalled scan names a cascade still for a whole scan interval:
  lib/worker/cascade.resumer.ts calls again), by the next cancel of the same run, or by any
  cancel call with budget to spare once the cascade has not moved for ARGV[7] ms. A child is cancelled only while it is
  still its parent's (not an id reused since) and its parent is still cancelled (not retried
  meanwhile) or gone.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, records, waits, slots, finish, batches

  KEYS[1] run:<id>  hash
  KEYS[2] leases    zset
  KEYS[3] limits    hash
  KEYS[4] seq       string
  KEYS[5] cascade:<id> list
  KEYS[6] cascades  zset
  KEYS[7], KEYS[8] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  ARGV[3] the error recorded, as JSON { name, message, reason? }
  ARGV[4] the reason given, or '' (for the workers' message)
  ARGV[5] retention in ms
  ARGV[6] runs this call visits at most (>= 1)
  ARGV[7] ms another run's cascade must have been still before this call carries it on
  Reply: { 'cancelled' | 'finished' | 'missing' (no record: the cascade left, if any, goes on), the state the run was in ('' if missing; a
         durable wait's state, e.g. 'sleeping', for a run in one), runs of its cascade this
         call cancelled, runs of its cascade still to visit (0: done) }
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
-- @include records
-- @include waits
-- @include slots
-- @include finish
-- @include batches

local base = ARGV[1]
local now = nowMs()
local freed, tally = {}, {}
local budget = math.max(1, tonumber(ARGV[6]))

-- Cancels one unfinished run; returns the state it was in (a wait's kind, if in one) and the
-- ids of the children it waited for.
local function cancelRun(runKey, id, f, err, reason)
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
    publish(base .. 'cancel', id .. ' ' .. f[5] .. ' ' .. reason)
  end
  finishRun(base, runKey, id, workflow, 'cancelled', 'error', err, now, tonumber(ARGV[5]), f[7], f[9] == '1')
  tallyFinished(tally, workflow, id)
  if f[11] then endMembers(base, id, f[11], 'cancelled', 'error', err, now, tonumber(ARGV[5]), tally) end
  return shown, children
end

local FIELDS = { 'state', 'workflow', 'group', 'priority', 'token', 'input', 'waited', 'wait', 'links', 'parent', 'batchOf' }
local function unfinished(f)
  return f[1] and f[2] and f[1] ~= 'completed' and f[1] ~= 'failed' and f[1] ~= 'cancelled'
end

-- A cancelled parent's error and reason, which its children take: nil if the parent is there but
-- not cancelled (retried since), the generic cancel if it is gone. Read once per parent a call.
local GONE = { '{"name":"RunCancelledError","message":"cancelled"}', '' }
local parents = {}
local function parentCancel(parentId)
  local known = parents[parentId]
  if known ~= nil then return known or nil end
  local p = redis.call('HMGET', base .. 'run:' .. parentId, 'state', 'error')
  if not p[1] then
    known = GONE
  elseif p[1] ~= 'cancelled' then
    known = false
  else
    local ok, decoded = pcall(cjson.decode, p[2] or '')
    known = { p[2] or GONE[1], ok and type(decoded) == 'table' and type(decoded.reason) == 'string' and decoded.reason or '' }
  end
  parents[parentId] = known
  return known or nil
end

local function queueChildren(listKey, parentId, children)
  if #children == 0 then return end
  local entries = {}
  for k, child in ipairs(children) do entries[k] = parentId .. ' ' .. child end
  callChunked('RPUSH', listKey, entries, 500)
end

-- Visits the entries of one cascade list while the call's budget lasts; returns the runs cancelled.
local function drain(listKey)
  local cancelled = 0
  while budget > 0 do
    local entries = redis.call('LPOP', listKey, budget)
    if not entries then break end
    for _, entry in ipairs(entries) do
      budget = budget - 1
      local parentId, id = string.match(entry, '^(%S+) (%S+)$')
      local runKey = base .. 'run:' .. id
      local c = redis.call('HMGET', runKey, unpack(FIELDS))
      -- Still this parent's child (not an id reused since by another run).
      if unfinished(c) and c[10] and string.sub(c[10], 1, #parentId + 1) == parentId .. ' ' then
        local cancel = parentCancel(parentId)
        if cancel then
          local _, children = cancelRun(runKey, id, c, cancel[1], cancel[2])
          cancelled = cancelled + 1
          queueChildren(listKey, id, children)
        end
      end
    end
  end
  return cancelled
end

-- Records how a cascade stands: in the cascades zset while runs are left to visit, else out.
local function settle(root, listKey)
  local left = redis.call('LLEN', listKey)
  if left > 0 then redis.call('ZADD', KEYS[6], now, root) else redis.call('ZREM', KEYS[6], root) end
  return left
end

local id = ARGV[2]
local f = redis.call('HMGET', KEYS[1], unpack(FIELDS))
-- 'missing': no such run, or its record expired with its cascade cut short (the children left
-- still go: each carries its parent's error, and a gone parent counts as cancelled).
local outcome, shown = 'missing', ''
if f[1] and f[2] then
  outcome, shown = 'finished', f[1]
  if unfinished(f) then
    local children
    shown, children = cancelRun(KEYS[1], id, f, ARGV[3], ARGV[4])
    outcome = 'cancelled'
    budget = budget - 1
    queueChildren(KEYS[5], id, children)
  end
end
-- A cancel sent again (after a lost reply, or to finish a cascade cut short) carries it on.
local cascaded = drain(KEYS[5])
local left = settle(id, KEYS[5])
-- Budget to spare: cascades whose caller went away (they have not moved for ARGV[7] ms).
if budget > 0 then
  for _, other in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now - tonumber(ARGV[7]), 'LIMIT', 0, 10)) do
    if budget <= 0 then break end
    local listKey = base .. 'cascade:' .. other
    drain(listKey)
    settle(other, listKey)
  end
end
countFinished(base, KEYS[3], tally, 'cancelled', now, tonumber(ARGV[5]))
wakeCapped(base, KEYS[3], freed)
return { outcome, shown, cascaded, left }
