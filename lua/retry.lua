#!lua
--[[
  retry: put failed or cancelled runs back to waiting, atomically per run. Each resumes where it
  failed: its step memo stays, and `attempts` is kept, so its next claim (attempt > 1) ships the
  memo and the finished steps are not executed again. It gets a full set of attempts (failures
  and stalls back to 0, its hand-back count 'handbacks' gone), loses its outcome (result, finishedAt, ended, a cancel's reason) and its
  retention (PERSIST), leaves its finish index, and is due now at the back of its lane (makeDue:
  group-aware, wakes a worker). `waited` and the latest error stay.

  A run that failed with a child's failure it did not catch (error ChildWorkflowFailedError) also
  loses the child failures in its memo ({"s":…} outcomes of `invoke:` keys, see waits.lua): else
  its replay would throw the same failure again. Its replay waits for those children anew
  (suspend.lua finds each by id: one retried since is waited for, a completed one gives its result,
  one still failed or cancelled its failure again, a removed one runs again).

  Mode 'one' retries the run ARGV[3]. Mode 'batch' retries the oldest entries of a finish index
  whose score is at most a bound fixed by the first batch (the highest score then), so runs that
  fail again meanwhile are not taken twice and a retryAll ends; the runs' hashes are found from
  the index (keys discovered, all of the namespace's slot). An entry whose run is gone or in
  another state is dropped.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups

  KEYS[1] limits  hash
  KEYS[2] seq     string
  KEYS[3] run:<id> hash (mode 'one') | the finish index wf:<name>:<state> (mode 'batch')
  KEYS[4], KEYS[5] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] mode: 'one' | 'batch'
  ARGV[3] run id ('one') | workflow name ('batch')
  ARGV[4] 'batch': the index's state, 'failed' | 'cancelled'
  ARGV[5] 'batch': runs to retry at most (1..500)
  ARGV[6] 'batch': highest score to take, or '' to fix it now
  Reply: 'one': { 'retried', previous state } | { 'missing', '' } | { 'state', the run's state }
         'batch': { runs retried, the bound ('' if the index is empty), 1 if entries remain
         under the bound else 0 }
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

local base, mode = ARGV[1], ARGV[2]
local now = nowMs()

-- The stored error of a run that failed with a child's failure (lib/worker/run.executor.ts
-- describeError: JSON with the name first).
local FAILED_BY_CHILD = '{"name":"ChildWorkflowFailedError",'

-- The memo fields of a run holding a child that did not complete: `invoke:` keys (no step may
-- be named so) whose outcome is {"s":"failed"|"cancelled",…} (childEnvelope in waits.lua).
local function childFailures(runKey)
  local fields, cursor = {}, '0'
  repeat
    local page = redis.call('HSCAN', runKey, cursor, 'MATCH', 'step:invoke:*', 'COUNT', 1000)
    cursor = page[1]
    for i = 1, #page[2], 2 do
      if string.sub(page[2][i + 1], 1, 6) == '{"s":"' then fields[#fields + 1] = page[2][i] end
    end
  until cursor == '0'
  return fields
end

-- Requeues one run if it is in `expected` (or, with nil, in either retryable state). Returns
-- the outcome and the state found.
local function requeue(id, runKey, expected, expectedWorkflow)
  local f = redis.call('HMGET', runKey, 'state', 'workflow', 'group', 'priority', 'error')
  local state, workflow = f[1], f[2]
  if not state or not workflow then return 'missing', '' end
  if (expected and state ~= expected) or (state ~= 'failed' and state ~= 'cancelled') then return 'state', state end
  -- An index entry whose id was reused by another workflow's run (before the entry was trimmed).
  if expectedWorkflow and workflow ~= expectedWorkflow then return 'state', state end
  local stale = {}
  if state == 'failed' and string.sub(f[5] or '', 1, #FAILED_BY_CHILD) == FAILED_BY_CHILD then stale = childFailures(runKey) end
  redis.call('HSET', runKey, 'state', 'waiting', 'failures', 0, 'stalls', 0, 'dueAt', now)
  if #stale > 0 then callChunked('HDEL', runKey, stale, 500) end
  redis.call('HDEL', runKey, 'result', 'finishedAt', 'ended', 'reason', 'handbacks')
  redis.call('PERSIST', runKey)
  redis.call('ZREM', wfKey(base, workflow, state), id)
  makeDue(base, KEYS[1], KEYS[2], workflow, f[3] or '', id, f[4] or 0, false)
  return 'retried', state
end

if mode == 'one' then
  local outcome, state = requeue(ARGV[3], KEYS[3], nil)
  return { outcome, state }
end

local state = ARGV[4]
local bound = ARGV[6]
if bound == '' then
  local top = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  if #top == 0 then return { 0, '', 0 } end
  bound = string.format('%.0f', tonumber(top[2]))
end
local retried, stale = 0, {}
-- KEYS[3] is wf:<name>:<state>.
local indexWorkflow = string.sub(KEYS[3], #base + 4, #KEYS[3] - #state - 1)
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', bound, 'LIMIT', 0, tonumber(ARGV[5]))) do
  if requeue(id, base .. 'run:' .. id, state, indexWorkflow) == 'retried' then retried = retried + 1 else stale[#stale + 1] = id end
end
for i = 1, #stale, 500 do redis.call('ZREM', KEYS[3], unpack(stale, i, math.min(i + 499, #stale))) end
local more = #redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', bound, 'LIMIT', 0, 1)
return { retried, bound, more }
