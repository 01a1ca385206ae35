-- claim: taking the lease of one due run and the reply row its worker gets; replaying a claiming
-- call whose reply was lost; taking the enqueue fast path's handoffs (`-- @include claim`).
-- Shared by reserve (a worker's wake) and complete (the slots finished runs free are refilled in
-- the same call).
-- @needs time, util, lanes, leases, records, waits
--
-- Bytes of inputs and memos in this call's reply so far: claiming stops once past the budget, so
-- one reply stays bounded however large runs' memos grow (each memo is bounded on its own by the
-- worker's maxRunMemoBytes).

local replyBytes = 0
local MAX_REPLY_BYTES = 8 * 1024 * 1024

-- A claim row ends with the run's time limit (row[8]) unless the run has a group or the caller
-- asked for the telemetry extras; then row[9] is its group ('' for none), which a worker reads to
-- hold only ungrouped runs ready (lib/worker/run.launcher.ts).
local function withGroup(row, group)
  if group and group ~= '' then row[9] = group end
end

-- Telemetry extras, asked for by a worker with OpenTelemetry on (the calling script sets this
-- from its flags argument). With them, each claim row also carries { …, group, trace, waitMs }
-- (after the run's time limit, row[8]): its group ('' for none), the run's stored trace context
-- ('' for none; see enqueue.lua) and how long it waited between becoming due and this claim in
-- ms (-1 when the record cannot tell). Without them a row carries none of this but the group.
local withExtras = false

local function addExtras(row, trace, waitMs, group)
  row[9], row[10], row[11] = group or '', trace or '', waitMs
  replyBytes = replyBytes + #row[10]
end

-- The step memo of a run as { step, value, … }: a first attempt has none (it is not read). A run
-- that continued as new (continue.lua) has its incarnation, `gen`, as a first pseudo-entry
-- '~gen' (no memo key has a '~'), so the worker tells its children's ids from an earlier
-- incarnation's; nothing else changes for the runs that never continued.
local function memoOf(runKey, attempt, gen)
  local memo = {}
  if gen then
    memo[1], memo[2] = '~gen', gen
    replyBytes = replyBytes + 4 + #gen
  end
  if attempt > 1 then
    local fields = redis.call('HGETALL', runKey)
    for i = 1, #fields, 2 do
      if string.sub(fields[i], 1, 5) == 'step:' then
        memo[#memo + 1] = string.sub(fields[i], 6)
        memo[#memo + 1] = fields[i + 1]
        replyBytes = replyBytes + #fields[i] + #fields[i + 1]
      end
    end
  end
  return memo
end

-- Takes the lease of a due run popped from a lane: the writes every claim makes, whatever path.
-- Appends the claim to `reply` as { id, workflow, token, attempt, failures, input, memo, timeoutMs }
-- where memo is { step, value, … } and timeoutMs the run's own time limit ('' for none: the
-- workflow's applies; see enqueue.lua) (plus the extras, see withExtras). An id without a record (it expired, or was written under another
-- key prefix) is not dropped silently: it goes to the `orphans` list (the latest 1,000).
local function claimRun(base, leasesKey, id, workflow, group, now, lockMs, reply)
  local runKey = base .. 'run:' .. id
  local f
  if withExtras then
    f = redis.call('HMGET', runKey, 'token', 'attempts', 'failures', 'input', 'timeoutMs', 'wait', 'gen', 'createdAt', 'trace', 'dueAt')
  else
    f = redis.call('HMGET', runKey, 'token', 'attempts', 'failures', 'input', 'timeoutMs', 'wait', 'gen', 'createdAt')
  end
  -- Every record has its input; a lean one (see storeRun) has no token before its first claim.
  if not f[4] then
    redis.call('LPUSH', base .. 'orphans', workflow .. ' ' .. id)
    redis.call('LTRIM', base .. 'orphans', 0, 999)
    return false
  end
  -- A durable wait that came due by its deadline but was promoted by an older version, which
  -- leaves the wait recorded (reserve ends it as it promotes; see waits.lua): its outcome joins
  -- the memo below.
  if f[6] then endWaitByTime(base, runKey, id, workflow, f[6]) end
  local token = intText((tonumber(f[1]) or (createdOf(id, f[8]) or now) * 1000) + 1)
  -- A lean run record (see storeRun) omits attempts and failures while they are 0.
  local attempts, failures = tonumber(f[2]) or 0, tonumber(f[3]) or 0
  local attempt = attempts + 1
  redis.call('HSET', runKey, 'state', 'active', 'token', token, 'attempts', intText(attempt), 'startedAt', intText(now))
  addActive(wfKey(base, workflow, 'active'), id)
  if group ~= '' then addActive(laneOf(base, workflow, group) .. 'active', id) end
  addActive(leasesKey, id, now + lockMs)
  replyBytes = replyBytes + #f[4]
  local row = { id, workflow, token, attempt, failures, f[4], memoOf(runKey, attempt, f[7]), f[5] or '' }
  if withExtras then
    -- `dueAt` is when the run last became due only if every earlier attempt failed (fail.lua
    -- sets it for the retry); a stall recovery or a hand-back makes the run due again without
    -- recording when, so its wait is unknown.
    local waitMs = -1
    local dueAt = tonumber(f[10]) or createdOf(id, f[8])
    if dueAt and attempts == failures then waitMs = math.max(0, now - dueAt) end
    addExtras(row, f[9], waitMs, group)
  else
    withGroup(row, group)
  end
  reply[#reply + 1] = row
  return true
end

-- A claiming call (reserve, or complete's refill) whose reply was lost is sent again with the same
-- call key. The first execution left its claims there as 'id token id token …': if the key
-- exists, this is the retry, and it hands those claims back (those still held by their token,
-- leases renewed) instead of claiming again. Returns true if it replayed.
local function replayClaims(base, leasesKey, callKey, now, lockMs, reply)
  local stored = redis.call('GET', callKey)
  if not stored then return false end
  for id, token in string.gmatch(stored, '(%S+) (%S+)') do
    local runKey = base .. 'run:' .. id
    local f = redis.call('HMGET', runKey, 'state', 'token', 'workflow', 'attempts', 'failures', 'input', 'trace', 'group', 'timeoutMs', 'gen')
    if f[1] == 'active' and f[2] == token then
      redis.call('ZADD', leasesKey, 'XX', intText(now + lockMs), id)
      local row = { id, f[3], token, tonumber(f[4]), tonumber(f[5]) or 0, f[6], memoOf(runKey, tonumber(f[4]), f[10]), f[9] or '' }
      -- The wait was the first execution's to report: unknown here.
      if withExtras then addExtras(row, f[7], -1, f[8]) else withGroup(row, f[8]) end
      reply[#reply + 1] = row
    end
  end
  return true
end

-- Keeps the claims of reply[from ..] under the call key for a retry (see replayClaims), for one
-- lease length: a claim older than that has been recovered by the stalled scan anyway.
local function rememberClaims(callKey, reply, from, ttlMs)
  if #reply < from then return end
  local parts = {}
  for i = from, #reply do parts[#parts + 1] = reply[i][1] .. ' ' .. reply[i][3] end
  redis.call('SET', callKey, table.concat(parts, ' '), 'PX', ttlMs)
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
  local leased, group = leasedRun(base .. 'run:' .. id, token)
  if not leased then return false end
  redis.call('ZADD', leasesKey, intText(now + lockMs), id)
  -- A run with its own time limit is never handed off (see enqueue.lua): '' for none.
  local row = { id, workflow, token, 1, 0, string.sub(entry, s2 + 1), {}, '' }
  if withExtras then
    -- Claimed by its enqueue, due then: the wait is the time it sat in the wake list.
    local f = redis.call('HMGET', base .. 'run:' .. id, 'trace', 'dueAt', 'createdAt')
    local dueAt = tonumber(f[2]) or createdOf(id, f[3])
    addExtras(row, f[1], dueAt and math.max(0, now - dueAt) or -1, group)
  else
    withGroup(row, group)
  end
  reply[#reply + 1] = row
  return true
end
