-- wakes: the wake lists workers block on, parked workers, and the enqueue fast path's handoffs
-- (`-- @include wakes`).
-- @needs time, util
--
-- A wake list ends in at most one marker: one blocked worker wakes, claims what it can, and
-- passes the marker on if work is left (see reserve). Fast-path handoffs may sit before it; a
-- marker goes after them, so the worker that takes a handoff also learns of the queued runs.
-- A list this call has seen end in the marker keeps ending in it for the rest of the call:
-- scripts never pop a marker (takeHandoff leaves one at the head), remove only handoff entries,
-- and push a handoff only onto an empty list; so each list is looked at once per call.

-- Set by every write to this include's per-call tables (see lib/redis/lua.library.ts).
local wakesDirty = false
local markedWakeLists = {}

-- Ends a wake list in the marker unless it does. `wakeOnce` for a call that wakes one list once (a
-- lone enqueue): remembering the list would cost more than it spares.
local function wakeOnce(wakeKey)
  if redis.call('LINDEX', wakeKey, -1) ~= '1' then
    redis.call('RPUSH', wakeKey, '1')
  end
end

local function wake(wakeKey)
  if markedWakeLists[wakeKey] then return end
  wakeOnce(wakeKey)
  markedWakeLists[wakeKey], wakesDirty = true, true
end

-- Drops the expired entries of workers parked on `workflow` (the enqueue fast path skips them
-- anyway): a worker that died parked leaves one.
local function sweepParked(base, workflow, now)
  redis.call('ZREMRANGEBYSCORE', wfKey(base, workflow, 'parked'), '-inf', now)
end

-- Announces a worker as about to block on its workflows' wake lists until now + ttlMs (see
-- park.lua), so the enqueue fast path hands it runs. `sweep`: expired entries go as a new one
-- comes (park calls do; a complete call's announcement, on the hot path, leaves that to them
-- and to the stalled scan, see reserve.lua).
local function parkWorker(base, workerEntry, ttlMs, workflows, sweep)
  local now = nowMs()
  for _, wf in ipairs(workflows) do
    if sweep then sweepParked(base, wf, now) end
    redis.call('ZADD', wfKey(base, wf, 'parked'), intText(now + ttlMs), workerEntry)
  end
end

-- A wake list entry other than the '1' marker is a handoff: a run the enqueue fast path already
-- claimed, ready to execute, as '<token> <id> <input>' (tokens and ids contain no spaces).
local function handoffEntry(token, id, input)
  return token .. ' ' .. id .. ' ' .. input
end

-- Puts a run in its workflow's delayed set, due at `dueAt` (the caller has set its state), and
-- wakes a worker if it is now the earliest: a blocked worker sleeps until the earliest is due.
-- `earliest` is the set's first entry WITHSCORES, read by the caller before its first write.
local function addDelayed(base, workflow, id, dueAt, earliest)
  redis.call('ZADD', wfKey(base, workflow, 'delayed'), dueAt, id)
  if #earliest == 0 or tonumber(earliest[2]) > dueAt then wake(wfKey(base, workflow, 'wake')) end
end
