-- Claiming due runs, shared by reserve (a worker's wake) and complete (the slots finished runs
-- free are refilled in the same call). Needs `common`.

-- Takes the lease of a due run popped from a lane: the writes every claim makes, whatever path.
-- Appends the claim to `reply` as { id, workflow, token, attempt, failures, input, memo } where
-- memo is { step, value, … } (a first attempt has none: it is not read).
local function claimRun(base, leasesKey, id, workflow, group, now, lockMs, reply)
  local runKey = base .. 'run:' .. id
  local f = redis.call('HMGET', runKey, 'token', 'attempts', 'failures', 'input')
  if not f[1] then return false end
  local token = tostring(tonumber(f[1]) + 1)
  local attempt = tonumber(f[2]) + 1
  redis.call('HSET', runKey, 'state', 'active', 'token', token, 'attempts', attempt, 'startedAt', now)
  redis.call('SADD', wfKey(base, workflow, 'active'), id)
  if group ~= '' then redis.call('SADD', laneOf(base, workflow, group) .. 'active', id) end
  redis.call('ZADD', leasesKey, now + lockMs, id)
  local memo = {}
  if attempt > 1 then
    local fields = redis.call('HGETALL', runKey)
    for i = 1, #fields, 2 do
      if string.sub(fields[i], 1, 5) == 'step:' then
        memo[#memo + 1] = string.sub(fields[i], 6)
        memo[#memo + 1] = fields[i + 1]
      end
    end
  end
  reply[#reply + 1] = { id, workflow, token, attempt, tonumber(f[3]), f[4], memo }
  return true
end

-- A run the enqueue fast path handed off is older than anything due: take it first. Its lease
-- now runs on this worker's clock. Returns true if one was taken.
local function takeHandoff(base, leasesKey, workflow, now, lockMs, reply)
  local wakeKey = wfKey(base, workflow, 'wake')
  local entry = redis.call('LINDEX', wakeKey, 0)
  if not entry or entry == '1' then return false end
  redis.call('LPOP', wakeKey)
  local s1 = string.find(entry, ' ', 1, true)
  local s2 = string.find(entry, ' ', s1 + 1, true)
  local token, id = string.sub(entry, 1, s1 - 1), string.sub(entry, s1 + 1, s2 - 1)
  if not leasedRun(base .. 'run:' .. id, token) then return false end
  redis.call('ZADD', leasesKey, now + lockMs, id)
  reply[#reply + 1] = { id, workflow, token, 1, 0, string.sub(entry, s2 + 1), {} }
  return true
end

-- Pops the next due run of a workflow's groups, in round-robin: the group at the head of the
-- `ready` zset gives one run (then rotateGroup moves it on); a group found without due runs or
-- room leaves the round-robin (it rejoins when a run of it becomes due or a slot of it frees;
-- see activateGroup). Returns id, group — or nil when no group can give a run.
-- Claiming only ever removes groups from `ready`, so once it is found empty it stays empty for
-- the rest of the call: workflows without groups pay one read per call, not one per claim.
local noReadyGroups = {}
local function popFromGroups(base, limitsKey, seqKey, workflow)
  if noReadyGroups[workflow] then return nil end
  local readyKey = wfKey(base, workflow, 'ready')
  while true do
    local head = redis.call('ZRANGE', readyKey, 0, 0)
    if #head == 0 then
      noReadyGroups[workflow] = true
      return nil
    end
    local group = head[1]
    local lane = laneOf(base, workflow, group)
    local id = groupRoom(base, limitsKey, workflow, group) and popDue(lane)
    if id then return id, group end
    redis.call('ZREM', readyKey, group)
  end
end

-- After a claim from a group: back of the round-robin if it still has due runs and room (the
-- claim may have filled its cap), else out of it.
local function rotateGroup(base, limitsKey, seqKey, workflow, group)
  local readyKey = wfKey(base, workflow, 'ready')
  if dueCount(laneOf(base, workflow, group)) > 0 and groupRoom(base, limitsKey, workflow, group) then
    redis.call('ZADD', readyKey, redis.call('INCR', seqKey), group)
  else
    redis.call('ZREM', readyKey, group)
  end
end

-- Claims up to maxClaims due runs, fairly: round-robin over `workflows`, one run per workflow per
-- pass; within a workflow, its ungrouped runs and its runnable groups take turns. Every cap —
-- namespace, workflow, group — is checked for each claim. With passWake, if the batch filled up
-- while runs are still claimable, passes the wake marker on to the next idle worker.
local function claimRuns(base, leasesKey, limitsKey, seqKey, workflows, maxClaims, now, lockMs, reply, passWake)
  local claimed = 0
  local open, groupTurn = {}, {}
  for i, wf in ipairs(workflows) do
    open[i] = true
    if claimed < maxClaims and takeHandoff(base, leasesKey, wf, now, lockMs, reply) then claimed = claimed + 1 end
  end

  local function claimOne(i, wf)
    if not workflowRoom(base, limitsKey, wf) then return false end
    local lane = laneOf(base, wf, '')
    local id, group
    if groupTurn[i] then
      id, group = popFromGroups(base, limitsKey, seqKey, wf)
      if not id then id, group = popDue(lane), '' end
    else
      id, group = popDue(lane), ''
      if not id then id, group = popFromGroups(base, limitsKey, seqKey, wf) end
    end
    if not id then return false end
    groupTurn[i] = group == ''
    if claimRun(base, leasesKey, id, wf, group, now, lockMs, reply) then claimed = claimed + 1 end
    if group ~= '' then rotateGroup(base, limitsKey, seqKey, wf, group) end
    return true
  end

  local progress = true
  while progress and claimed < maxClaims do
    progress = false
    for i, wf in ipairs(workflows) do
      if open[i] and claimed < maxClaims then
        if not namespaceRoom(leasesKey, limitsKey) then return claimed end
        open[i] = claimOne(i, wf)
        progress = progress or open[i]
      end
    end
  end

  if passWake and claimed >= maxClaims and maxClaims > 0 and namespaceRoom(leasesKey, limitsKey) then
    for i, wf in ipairs(workflows) do
      if open[i] and workflowRoom(base, limitsKey, wf) and hasDue(base, wf) then wake(wfKey(base, wf, 'wake')) end
    end
  end
  return claimed
end
