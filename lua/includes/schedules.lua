-- schedules: cron schedules (`-- @include schedules`).
-- @needs util, groups, records
--
-- The hash `schedule:<id>` is the truth:
-- definition (workflow, cron, tz, input, group, priority, attempts, overlap, catchUp,
-- catchUpLimit), state (paused, `next`: the next fire in ms, `plan`: the occurrences planned
-- after it, `last`: the latest occurrence fired, `lastRun`, `fired`, `skipped`) and `rev`, bumped
-- by every change of definition or plan (the compare-and-set of schedule-plan). The zset
-- `wf:<name>:next-fires` (score = next fire) is an index derived from the hashes: firing looks
-- up due entries in it but re-checks each against its hash, and repairs or removes a stale one.
-- Lua cannot evaluate cron, so the occurrences come from workers (lib/schedule/cron.plan.ts), as
-- a plan of the next PLAN_AHEAD computed from Redis time; Redis fires from the plan and asks a
-- worker for more (plan requests in reserve's reply) before it runs out.

-- Index entries one call looks at per workflow, and runs one call may fire in all.
local SCHEDULE_BATCH = 16
local FIRE_BUDGET = 256
-- Fewer occurrences than this left in a plan: ask a worker to extend it.
local PLAN_LOW = 8
-- A plan request unanswered this long (its worker died) is asked again.
local PLAN_ASK_MS = 5000
-- Schedules the repair sweep checks per workflow per stalled-scan interval.
local SWEEP_BATCH = 32

local function scheduleKey(base, id) return base .. 'schedule:' .. id end

local function csvNumbers(text)
  local out = {}
  if text and text ~= '' then
    for t in string.gmatch(text, '[^,]+') do out[#out + 1] = tonumber(t) end
  end
  return out
end

local function msText(ms) return string.format('%.0f', ms) end

local function numbersCsv(list, from)
  local parts = {}
  for i = from or 1, #list do parts[#parts + 1] = msText(list[i]) end
  return table.concat(parts, ',')
end

local SCHEDULE_FIELDS = { 'workflow', 'paused', 'next', 'plan', 'catchUp', 'catchUpLimit', 'overlap', 'lastRun',
  'input', 'group', 'priority', 'attempts', 'rev', 'asked', 'cron', 'tz', 'since', 'last', 'fired', 'skipped' }

local function readSchedule(key)
  local values = redis.call('HMGET', key, unpack(SCHEDULE_FIELDS))
  local s = {}
  for i, name in ipairs(SCHEDULE_FIELDS) do s[name] = values[i] end
  return s
end

-- Asks a worker for occurrences (at most once per PLAN_ASK_MS per schedule): 'extend' appends
-- occurrences after `seen` (the plan's tail); 'replan' replaces a plan that ran out, from
-- `seen` (the next-fire it replaces), owing the occurrences after `floor` up to `max`.
local function askPlan(key, id, s, now, mode, seen, requests)
  if s.asked and now - tonumber(s.asked) < PLAN_ASK_MS then return end
  redis.call('HSET', key, 'asked', now)
  local floor = math.max(tonumber(s.last) or 0, tonumber(s.since) or 0)
  local max = 1
  if s.catchUp == 'all' then max = tonumber(s.catchUpLimit) or 1 end
  requests[#requests + 1] = { id, s.workflow, s.cron, s.tz or '', s.rev, mode, seen, msText(floor), max }
end

-- Whether the run a schedule started last has not finished (overlap: false skips then).
local function stillRunning(base, runId)
  if not runId then return false end
  local state = redis.call('HGET', base .. 'run:' .. runId, 'state')
  return state == 'waiting' or state == 'delayed' or state == 'active'
end

-- Fires one occurrence: a run with the deterministic id '<schedule>@<occurrence ms>' (an
-- existing id is left alone, so a fire is idempotent). Returns the run id, or nil if skipped.
local function fireOccurrence(base, limitsKey, seqKey, id, s, occurrence, now)
  if s.overlap == '0' and stillRunning(base, s.lastRun) then return nil end
  local runId = id .. '@' .. msText(occurrence)
  local runKey = base .. 'run:' .. runId
  if redis.call('EXISTS', runKey) == 0 then
    storeRun(base, runId, s.workflow, s.input, 'waiting', s.priority, s.attempts, s.group or '', nil, 'schedule', id)
    makeDue(base, limitsKey, seqKey, s.workflow, s.group or '', runId, s.priority, false)
  end
  s.lastRun = runId
  return runId
end

-- Fires what a due schedule owes from its plan, advances `next` to its first future occurrence
-- and re-scores the index. A plan with no future occurrence left (workers were away longer than
-- it reaches) fires nothing: which occurrence is the latest missed is unknown here, so a worker
-- replans from Redis time first. Returns the occurrences handled (fired or skipped by overlap).
local function fireDue(base, limitsKey, seqKey, indexKey, key, id, s, now, budget, requests)
  local times = csvNumbers(s.plan)
  table.insert(times, 1, tonumber(s.next))
  local due = 0
  while due < #times and times[due + 1] <= now do due = due + 1 end
  if due == #times then
    redis.call('ZADD', indexKey, now + PLAN_ASK_MS, id)
    askPlan(key, id, s, now, 'replan', s.next, requests)
    return 0
  end
  -- 'latest' collapses a backlog into its latest occurrence; 'all' keeps up to catchUpLimit.
  local first = due
  if s.catchUp == 'all' then first = math.max(1, due - (tonumber(s.catchUpLimit) or 1) + 1) end
  local last = math.min(due, first + budget - 1)
  local fired, skipped = 0, first - 1
  for i = first, last do
    if fireOccurrence(base, limitsKey, seqKey, id, s, times[i], now) then fired = fired + 1 else skipped = skipped + 1 end
  end
  redis.call('HSET', key, 'next', msText(times[last + 1]), 'plan', numbersCsv(times, last + 2), 'last', msText(times[last]),
    'lastRun', s.lastRun or '', 'fired', (tonumber(s.fired) or 0) + fired, 'skipped', (tonumber(s.skipped) or 0) + skipped)
  redis.call('ZADD', indexKey, msText(times[last + 1]), id)
  if #times - last - 1 < PLAN_LOW then askPlan(key, id, s, now, 'extend', msText(times[#times]), requests) end
  return last - first + 1
end

-- Ms until the earliest fire in a workflow's index (0 if due), or -1 if it is empty.
local function nextFireIn(indexKey, now)
  local head = redis.call('ZRANGE', indexKey, 0, 0, 'WITHSCORES')
  if #head == 0 then return -1 end
  return math.max(0, tonumber(head[2]) - now)
end

-- Fires the due schedules of a workflow (bounded: SCHEDULE_BATCH index entries, `budget` runs),
-- repairing stale index entries on the way. Returns the budget left and the ms until the next
-- fire (-1: none). A workflow without schedules costs one read.
local function fireSchedules(base, limitsKey, seqKey, workflow, now, budget, requests)
  local indexKey = wfKey(base, workflow, 'next-fires')
  local fireIn = nextFireIn(indexKey, now)
  if fireIn ~= 0 then return budget, fireIn end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', indexKey, '-inf', now, 'LIMIT', 0, SCHEDULE_BATCH)) do
    if budget <= 0 then break end
    local key = scheduleKey(base, id)
    local s = readSchedule(key)
    if s.workflow ~= workflow or s.paused == '1' then
      redis.call('ZREM', indexKey, id) -- hash gone, moved to another workflow, or paused
    elseif not tonumber(s.next) then
      -- No next fire (or not a number): a worker plans it; the index entry waits for that.
      redis.call('ZADD', indexKey, now + PLAN_ASK_MS, id)
      askPlan(key, id, s, now, 'replan', s.next or '', requests)
    elseif tonumber(s.next) > now then
      redis.call('ZADD', indexKey, s.next, id) -- the index was behind the hash
    else
      budget = budget - fireDue(base, limitsKey, seqKey, indexKey, key, id, s, now, budget, requests)
    end
  end
  return budget, nextFireIn(indexKey, now)
end

-- Puts a schedule's index entry in line with its hash: removed when the hash is gone, belongs to
-- another workflow or is paused; scored by `next` otherwise (now, if it has none: the next claim
-- asks for a plan). Returns false if the schedule no longer belongs to the workflow.
local function indexSchedule(base, workflow, id, now)
  local indexKey = wfKey(base, workflow, 'next-fires')
  local f = redis.call('HMGET', scheduleKey(base, id), 'workflow', 'paused', 'next')
  if f[1] ~= workflow then
    redis.call('ZREM', indexKey, id)
    return false
  end
  if f[2] == '1' then
    redis.call('ZREM', indexKey, id)
  elseif f[3] and f[3] ~= '' then
    redis.call('ZADD', indexKey, f[3], id)
  else
    redis.call('ZADD', indexKey, now, id)
  end
  return true
end

-- The repair sweep (from reserve's stalled scan, once per interval fleet-wide): checks the next
-- SWEEP_BATCH schedules of a workflow, resuming where the previous sweep stopped, so an index
-- entry that is missing or scored later than its hash is repaired within a few intervals.
local function sweepSchedules(base, workflow, now)
  local listKey = wfKey(base, workflow, 'schedules')
  local cursorKey = wfKey(base, workflow, 'sweep')
  local after = redis.call('GET', cursorKey)
  local ids = redis.call('ZRANGEBYLEX', listKey, after and ('(' .. after) or '-', '+', 'LIMIT', 0, SWEEP_BATCH)
  if #ids < SWEEP_BATCH then redis.call('DEL', cursorKey) else redis.call('SET', cursorKey, ids[#ids]) end
  for _, id in ipairs(ids) do
    if not indexSchedule(base, workflow, id, now) then redis.call('ZREM', listKey, id) end
  end
end
