-- groups: a workflow's groups and the round-robin of those that can run (`-- @include groups`).
-- @needs util, lanes, wakes, leases, rates, caps
--
-- A group is listed in its workflow's `groups` set while it has due or active runs (for stats and
-- cap changes). The stats field 'groupDue' counts the runs due in group lanes, so stats reads one
-- number instead of visiting every group; the claim pass takes its pops off (see settleGroups).
--
-- A group is in its workflow's round-robin of runnable groups (the `ready` zset, by turn) only
-- with due runs and room under its cap: a group without either stays out, so claiming never
-- visits it. Turns of the group round-robin: increasing numbers, taken from the `turn` counter in
-- blocks so a call pays one INCRBY however many groups it moves.

local turnNext, turnLast = 1, 0
local function nextTurn(base)
  if turnNext > turnLast then
    turnLast = redis.call('INCRBY', base .. 'turn', 64)
    turnNext = turnLast - 63
  end
  turnNext = turnNext + 1
  return turnNext - 1
end

-- Puts a group in its workflow's round-robin of runnable groups (at the back) if it has due runs
-- and room under its cap. Returns true if the group was added.
local function activateGroup(base, limitsKey, seqKey, workflow, group)
  local readyKey = wfKey(base, workflow, 'ready')
  -- The common case, a group with a backlog, is in the round-robin already: one read.
  if redis.call('ZSCORE', readyKey, group) then return false end
  local lane = laneOf(base, workflow, group)
  if not laneHasDue(lane) then return false end
  local room, freeAt = groupRoom(base, limitsKey, workflow, group)
  if not room then
    if freeAt then holdForRate(base, workflow, group, freeAt) end
    return false
  end
  return redis.call('ZADD', readyKey, nextTurn(base), group) == 1
end

-- Makes a run due (see pushDue) and announces it to its workflow's workers.
local function makeDue(base, limitsKey, seqKey, workflow, group, id, priority, front)
  local grouped = group and group ~= ''
  pushDue(laneOf(base, workflow, group), seqKey, id, priority, front, not grouped)
  if grouped then
    redis.call('HINCRBY', wfKey(base, workflow, 'stats'), 'groupDue', 1)
    redis.call('SADD', wfKey(base, workflow, 'groups'), group)
    activateGroup(base, limitsKey, seqKey, workflow, group)
  end
  wake(wfKey(base, workflow, 'wake'))
end

-- After a slot of a group freed: the group rejoins the round-robin if it can run again, or, if
-- it is idle now, leaves the workflow's list of groups and costs nothing. Returns true if it
-- rejoined.
local function reviewGroup(base, limitsKey, seqKey, workflow, group)
  if activateGroup(base, limitsKey, seqKey, workflow, group) then return true end
  local lane = laneOf(base, workflow, group)
  if not laneHasDue(lane) and activeCount(lane .. 'active') == 0 then
    redis.call('SREM', wfKey(base, workflow, 'groups'), group)
  end
  return false
end

-- Groups one call brings back after a change of every group's default cap. A workflow may have
-- any number of groups; a call visiting all of them would block Redis for as long, so the caller
-- goes through them in batches (see activate-groups).
local GROUP_BATCH = 500

-- Visits one batch of a workflow's groups from an SSCAN cursor of its `groups` set: each that
-- has due runs and room now rejoins the round-robin. SSCAN returns about GROUP_BATCH groups
-- (all of them while the set is small) and, across calls, every group present from the first
-- call to the last; a group added in between joined when it did (makeDue). Returns the next
-- cursor, '0' when every group was visited, and whether a group rejoined.
local function activateGroupBatch(base, limitsKey, seqKey, workflow, cursor)
  local page = redis.call('SSCAN', wfKey(base, workflow, 'groups'), cursor, 'COUNT', GROUP_BATCH)
  local joined = false
  for _, group in ipairs(page[2]) do
    if activateGroup(base, limitsKey, seqKey, workflow, group) then joined = true end
  end
  return page[1], joined
end

-- After a cap changed (at runtime or by a bootstrap): a group it held back rejoins its
-- workflow's round-robin, and the workers concerned are woken. `workflow` '' means every
-- registered workflow; `group` '' no group, '*' every group of the workflow: those are left to
-- the caller's batches (activateGroupBatch), as no call visits every group.
local function afterCapChange(base, limitsKey, seqKey, workflow, group)
  local workflows = { workflow }
  if workflow == '' then workflows = redis.call('SMEMBERS', base .. 'workflows') end
  for _, wf in ipairs(workflows) do
    if group ~= '' and group ~= '*' then activateGroup(base, limitsKey, seqKey, wf, group) end
    if hasDue(base, wf) then wake(wfKey(base, wf, 'wake')) end
  end
end
