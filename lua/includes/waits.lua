-- waits: durable waits (ctx.sleep, waitForSignal, waitForEvent, invoke), shared by the scripts
-- that start, end and inspect them (`-- @include waits`).
-- @needs time, util, groups
--
-- A waiting run holds no lease and no slot. Its record keeps the state 'delayed' — what older
-- versions know a run that is not due yet by, and leave alone or promote on time — and says
-- what it waits for in the field
--   wait      '<kind> <deadline ms | NEVER> <memo key> <target>'
--             kind 'sleep' (target ''), 'signal' (the signal's name), 'event' ('<name>|<key>'),
--             'child' (the child run ids, space-separated; the memo key is the first child's)
--   waitLeft  children still running (kind 'child')
--   waitRoom  bytes the wait's outcomes may still add to the memo (the worker's maxRunMemoBytes
--             less the memo so far, its position entries included): an outcome past it — a
--             payload, a child's result, or the {"t":1} of a sleep or timeout written at
--             promotion — is recorded as {"x":<bytes>} instead, which fails the run with
--             StepMemoLimitError at the wait (fitOutcome). Every memo write a script makes on its
--             own is counted so; the worker counts the step results it writes under its lease.
-- and sits in its workflow's index of that kind, wf:<name>:sleeping | :waiting-signal |
-- :waiting-event | :waiting-child (zset, score = deadline, NEVER for none), which stats counts and
-- listRuns pages. A wait with a deadline is also in wf:<name>:delayed, so reserve promotes it on
-- time like any delayed run and ends the wait by time as it does (endWaitByTime). A wait that
-- ends with a value (a signal, an event, its children's outcomes) is ended by the script that
-- brings the value (resumeWith). Either way the outcome is written to the run's step memo under
-- the wait's key, as a JSON envelope the worker decodes (lib/execution/wait.outcome.ts):
--   {"p":<payload>} | {"u":1} (payload undefined) | {"t":1} (ended by time: a sleep's end or a
--   timeout) | {"e":<error>,"s":"failed"|"cancelled"} (a child that did not complete) |
--   {"x":<bytes>} (the outcome would have taken the memo past its budget)

-- "No deadline": a finite score (Lua 5.1's tonumber cannot read Redis's 'inf'), past any date.
local NEVER = 4503599627370496
local WAIT_INDEX = { sleep = 'sleeping', signal = 'waiting-signal', event = 'waiting-event', child = 'waiting-child' }
local ENDED_BY_TIME = '{"t":1}'

local function parseWait(desc)
  local kind, deadline, memoKey, target = string.match(desc, '^(%S+) (%S+) (%S+) ?(.*)$')
  return kind, tonumber(deadline), memoKey, target
end

-- The set of runs waiting for one event name and key: what sendEvent visits, and nothing else.
local function eventIndex(base, target)
  return base .. 'event:' .. target
end

-- A payload as the memo envelope: encoded payloads are JSON, '' stands for undefined.
local function payloadEnvelope(payload)
  if payload == '' then return '{"u":1}' end
  return '{"p":' .. payload .. '}'
end

-- An outcome as it may enter the memo under `memoKey`, within `room` bytes (nil: no bound, a
-- wait recorded by an older version): the envelope, or the over-budget marker. Returns it and
-- the room left.
local function fitOutcome(memoKey, envelope, room)
  if not room then return envelope, nil end
  local bytes = #memoKey + #envelope
  if bytes > room then return '{"x":' .. bytes .. '}', room end
  return envelope, room - bytes
end

-- Takes the run out of its wait's indexes and drops the wait fields.
local function leaveWait(base, runKey, id, workflow, desc)
  local kind, deadline, _, target = parseWait(desc)
  redis.call('ZREM', wfKey(base, workflow, WAIT_INDEX[kind]), id)
  if deadline < NEVER then redis.call('ZREM', wfKey(base, workflow, 'delayed'), id) end
  if kind == 'event' then redis.call('SREM', eventIndex(base, target), id) end
  redis.call('HDEL', runKey, 'wait', 'waitLeft', 'waitRoom')
end

-- A wait whose deadline came (reserve's promotion; at claim, one an older version promoted) ended
-- by its time. A child wait has no deadline; should one be found here anyway, the replay invokes
-- the same children again and waits for them.
-- The outcome counts against the wait's room like any other (a sleep in a loop must not grow the
-- memo past its budget one {"t":1} at a time).
local function endWaitByTime(base, runKey, id, workflow, desc)
  if string.sub(desc, 1, 6) ~= 'child ' then
    local _, _, memoKey = parseWait(desc)
    local envelope = fitOutcome(memoKey, ENDED_BY_TIME, tonumber(redis.call('HGET', runKey, 'waitRoom')))
    redis.call('HSET', runKey, 'step:' .. memoKey, envelope)
  end
  leaveWait(base, runKey, id, workflow, desc)
end

-- Ends a waiting run's wait with `envelope` under `memoKey` (within its room, see fitOutcome) and
-- makes the run due (at the back of its priority, as a promoted delayed run). `f` is { state,
-- wait, workflow, group, priority, waitRoom }.
local function resumeWith(base, runKey, id, f, memoKey, envelope)
  envelope = fitOutcome(memoKey, envelope, tonumber(f[6]))
  redis.call('HSET', runKey, 'step:' .. memoKey, envelope, 'state', 'waiting', 'dueAt', nowMs())
  leaveWait(base, runKey, id, f[3], f[2])
  makeDue(base, base .. 'limits', base .. 'seq', f[3], f[4] or '', id, f[5], false)
end

-- The fields resumeWith needs, read with the wait's kind check: returns them if the run waits,
-- with `kind`, else nil.
local function waitingRun(runKey, kind)
  local f = redis.call('HMGET', runKey, 'state', 'wait', 'workflow', 'group', 'priority', 'waitRoom')
  if f[1] ~= 'delayed' or not f[2] or string.sub(f[2], 1, #kind + 1) ~= kind .. ' ' then return nil end
  return f
end

-- A finished run's outcome as its parent's memo envelope.
local function childEnvelope(state, payload)
  if state == 'completed' then return payloadEnvelope(payload) end
  return '{"s":"' .. state .. '","e":' .. (payload ~= '' and payload or 'null') .. '}'
end

-- Delivers a child run's outcome to its parent; finishRun (finish.lua) calls it.
local onChildFinished

-- A child run finished (finishRun): its outcome goes to the parent's memo under the key the
-- child was invoked at; the parent resumes once its last child of the wait has finished. A parent
-- that no longer waits (cancelled meanwhile) is left alone.
onChildFinished = function(base, parentRef, state, payload)
  local parentId, memoKey = string.match(parentRef, '^(%S+) (%S+)$')
  local parentKey = base .. 'run:' .. parentId
  local f = waitingRun(parentKey, 'child')
  if not f then return end
  if redis.call('HEXISTS', parentKey, 'step:' .. memoKey) == 1 then return end
  local envelope, room = fitOutcome(memoKey, childEnvelope(state, payload), tonumber(f[6]))
  redis.call('HSET', parentKey, 'step:' .. memoKey, envelope)
  if room then redis.call('HSET', parentKey, 'waitRoom', room) end
  if redis.call('HINCRBY', parentKey, 'waitLeft', -1) > 0 then return end
  redis.call('HSET', parentKey, 'state', 'waiting', 'dueAt', nowMs())
  leaveWait(base, parentKey, parentId, f[3], f[2])
  makeDue(base, base .. 'limits', base .. 'seq', f[3], f[4] or '', parentId, f[5], false)
end
