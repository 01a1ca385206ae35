-- lanes: where due runs queue, and how a claim takes them (`-- @include lanes`).
-- @needs util
--
-- A lane is where due runs queue: a workflow's ungrouped runs, or one group of a workflow. Its
-- keys are lane .. 'queue' (list, priority 0, FIFO: the cheap common case) and lane ..
-- 'waiting' (zset, priority > 0); a group lane also has lane .. 'active' (set).
--
-- Per-call caches (noPriorities, dryLanes, activeCache, limitCache, and the rings in claim-pass.lua)
-- are sound because every script makes runs due (pushDue) before it claims (popDue), never after:
-- keep that order when adding to a script.

local function laneOf(base, workflow, group)
  if group and group ~= '' then return base .. 'wf:' .. workflow .. ':g:' .. group .. ':' end
  return base .. 'wf:' .. workflow .. ':'
end

-- Waiting score: higher priority first, FIFO within a priority. Priority takes the top 20 bits,
-- a namespace sequence the low 32, which keeps the score an exact integer in a double (< 2^53).
-- Formatted with %.0f because tostring() would round it to 14 significant digits.
local MAX_PRIORITY = 1048575
local function bandScore(priority, seq)
  return string.format('%.0f', (MAX_PRIORITY - tonumber(priority)) * 4294967296 + seq)
end

-- Runs of priority 0 a batch enqueue (enqueue-many) made due, per ungrouped lane, in order:
-- pushed with one RPUSH per lane at the end of the call (flushDuePushes) rather than one each.
-- Nil unless the call asked for it (deferDuePushes); nothing in such a call reads those lists.
local duePushes = nil
local function deferDuePushes()
  duePushes = {}
end
local function flushDuePushes()
  for lane, ids in pairs(duePushes) do callChunked('RPUSH', lane .. 'queue', ids, 500) end
  duePushes = nil
end

-- Makes a run due in its lane: at the back of its priority, or at the front (a run that was
-- already started once: stalled, or handed back at shutdown). `deferrable`: the lane is a
-- workflow's ungrouped one, whose push may wait for flushDuePushes (a group's lane is read by
-- activateGroup right after).
local function pushDue(lane, seqKey, id, priority, front, deferrable)
  -- A lean run record omits priority 0 (see storeRun); '0' is told without a strtod.
  priority = (priority ~= '0' and tonumber(priority)) or 0
  if priority == 0 and duePushes and deferrable and not front then
    local ids = duePushes[lane]
    if not ids then
      ids = {}
      duePushes[lane] = ids
    end
    ids[#ids + 1] = id
  elseif priority == 0 then
    redis.call(front and 'LPUSH' or 'RPUSH', lane .. 'queue', id)
  else
    local seq = 0
    if not front then seq = redis.call('INCR', seqKey) % 4294967296 end
    redis.call('ZADD', lane .. 'waiting', bandScore(priority, seq), id)
  end
end

-- Set by every write to this include's per-call tables (see lib/redis/lua.library.ts).
local lanesDirty = false

-- Lanes whose priority zset this call found empty. Only pushDue adds to a zset, and claiming
-- (the caller of popDue) never does, so an empty zset stays empty for the rest of a claim pass:
-- most lanes hold only priority-0 runs, and this spares them a ZPOPMIN per claim.
local noPriorities = {}

local function dueCount(lane)
  local count = redis.call('LLEN', lane .. 'queue')
  if noPriorities[lane] then return count end
  return count + redis.call('ZCARD', lane .. 'waiting')
end

-- Lanes this call found dry, for the same reason as noPriorities.
local dryLanes = {}

-- Whether a lane has due runs (cheaper than dueCount: stops at the first non-empty key).
local function laneHasDue(lane)
  if dryLanes[lane] and noPriorities[lane] then return false end
  return redis.call('LLEN', lane .. 'queue') > 0 or (not noPriorities[lane] and redis.call('ZCARD', lane .. 'waiting') > 0)
end

-- Runs a call popped from a lane's FIFO list ahead of claiming them (popDue with `want` > 1),
-- per lane { ids, next }: one LPOP with a count for a batch instead of one per run. The ones
-- left unclaimed go back to the front of the list, in order, before the call looks at the lane
-- again (restorePopped): in between, the list's length does not count them.
local poppedAhead = {}

-- Takes the next due run of a lane: priorities first, then the FIFO list. `want` (optional) is
-- how many the caller may take from this lane in the call: the list is popped that many at once.
local function popDue(lane, want)
  local buffer = poppedAhead[lane]
  if buffer then
    local id = buffer.ids[buffer.next]
    if id then
      buffer.next = buffer.next + 1
      return id
    end
    poppedAhead[lane] = nil
    if buffer.short then dryLanes[lane], lanesDirty = true, true end
  end
  if dryLanes[lane] then return false end
  if not noPriorities[lane] then
    local top = redis.call('ZPOPMIN', lane .. 'waiting')
    if #top > 0 then return top[1] end
    noPriorities[lane], lanesDirty = true, true
  end
  want = math.max(want or 1, 1)
  local ids = redis.call('LPOP', lane .. 'queue', want)
  if not ids then
    dryLanes[lane], lanesDirty = true, true
    return false
  end
  if want > 1 then poppedAhead[lane], lanesDirty = { ids = ids, next = 2, short = #ids < want }, true end
  return ids[1]
end

-- Puts the runs popDue popped ahead but the call did not claim back at the front of their lists, in
-- their order. Called when a claim pass ends, before anything reads a lane's length.
local function restorePopped()
  for lane, buffer in pairs(poppedAhead) do
    local rest = {}
    for i = #buffer.ids, buffer.next, -1 do rest[#rest + 1] = buffer.ids[i] end
    if #rest > 0 then
      redis.call('LPUSH', lane .. 'queue', unpack(rest))
      dryLanes[lane] = nil
    end
  end
  poppedAhead = {}
end

-- Whether a workflow has due runs in any lane.
local function hasDue(base, workflow)
  return laneHasDue(laneOf(base, workflow, '')) or redis.call('ZCARD', wfKey(base, workflow, 'ready')) > 0
end

-- Counts the runs due in every group lane of a workflow and stores the sum as the exact
-- 'groupDue' (see makeDue): the one pass over a workflow's groups, for a count that is missing
-- (data from before it existed) or was disturbed. Returns the sum.
local function recountGroupDue(base, workflow)
  local sum = 0
  for _, group in ipairs(redis.call('SMEMBERS', wfKey(base, workflow, 'groups'))) do
    sum = sum + dueCount(laneOf(base, workflow, group))
  end
  redis.call('HSET', wfKey(base, workflow, 'stats'), 'groupDue', sum, 'groupDueExact', 1)
  return sum
end
