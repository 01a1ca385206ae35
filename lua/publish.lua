#!lua
--[[
  publish: publish an event (QueueClient.publish): start one run of every workflow subscribed to
  its name (see declare-triggers.lua), with the payload as input, each exactly as lua/enqueue.lua
  would (fast path included) under the id 'evt:<event id>:<workflow>', and resume the runs
  waiting in ctx.waitForEvent(name, { key }) with it, at most ARGV[10] of them per call, as
  send-event.lua does (the caller sends send-event for the rest). Idempotent on the event id: the
  event's record (KEYS[1]) lists the runs it started; while it is kept (ARGV[9] ms), a publish of
  the same id writes nothing and answers those runs. After it expires, a run still kept answers
  for itself (enqueue's idempotency on the run id). Reads the record and the subscriptions before
  its first write.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, records, waits, event-waits, enqueue

  KEYS[1] published:<event id>  hash: the event's record (name, at, nonce, runs, resumed)
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  Also, named from the key base, in the same slot: 'on:<event name>' (hash: subscribed workflow ->
          max attempts, '' for the default), 'published-by:<event name>' (zset: the name's event
          ids, score = publish time in ms, trimmed to ARGV[9] ms and 10,000 ids), each new run's
          record and its workflow's keys, leases, limits, seq, and the waits index
          'event:<name>|<key>'
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] event name
  ARGV[3] event id
  ARGV[4] encoded payload ('' = undefined)
  ARGV[5] the key of the waits to resume ('' for waits with no key)
  ARGV[6] two flags, each '1' or '0' (as enqueue.lua's first two): allow the fast path; store
          lean run records
  ARGV[7] lease length in ms of a fast-pathed run, if the parked worker's announcement names none
  ARGV[8] nonce of the publish call: a retry after a lost reply finds the record its first try
          wrote and answers as that try did
  ARGV[9] how long the event's record is kept, in ms
  ARGV[10] most waiting runs to resume in this call
  Reply: { 1 this call published the event (or is the retry of the call that did) | 0 the id was
         published before (nothing written), the name it was published under, waiting runs
         resumed, waiting runs left in the index (0 for a publish that wrote nothing), then per
         run started: workflow, run id, 1 created by this call | 0 the run existed }
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
-- @include event-waits
-- @include enqueue

local base, name, eventId, payload = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local recordKey, nonce, keepMs = KEYS[1], ARGV[8], tonumber(ARGV[9])
local target = name .. '|' .. ARGV[5]

-- Published before (or by this call's lost try): its record answers.
local found = redis.call('HMGET', recordKey, 'name', 'nonce', 'runs', 'resumed')
if found[1] then
  local mine = found[2] == nonce
  local reply = { mine and 1 or 0, found[1], mine and tonumber(found[4]) or 0, mine and redis.call('SCARD', eventIndex(base, target)) or 0 }
  for workflow, id, created in string.gmatch(found[3] or '', '(%S+) (%S+) (%S+)') do
    reply[#reply + 1], reply[#reply + 2], reply[#reply + 3] = workflow, id, mine and tonumber(created) or 0
  end
  return reply
end

-- The subscribers, in name order (a stable reply).
local pairsFound = redis.call('HGETALL', base .. 'on:' .. name)
local subscribers = {}
for i = 1, #pairsFound, 2 do subscribers[#subscribers + 1] = { pairsFound[i], pairsFound[i + 1] } end
table.sort(subscribers, function(a, b) return a[1] < b[1] end)

local fastPath, lean = string.byte(ARGV[6], 1, 2)
local reply = { 1, name, 0, 0 }
local runs = {}
local tag = name .. ' ' .. eventId
for _, subscriber in ipairs(subscribers) do
  local workflow, attempts = subscriber[1], subscriber[2]
  if attempts == '' then attempts = DEFAULT_MAX_ATTEMPTS end
  local id = 'evt:' .. eventId .. ':' .. workflow
  local created = enqueueRun(base, id, workflow, payload, '0', '0', '', attempts, '', fastPath == 49, ARGV[7], '', nonce, '', '',
    lean == 49, true)
  -- Where the run came from, for RunInfo.event and the dashboard (a run that existed keeps its own).
  if created == 1 then redis.call('HSET', base .. 'run:' .. id, 'event', tag) end
  reply[#reply + 1], reply[#reply + 2], reply[#reply + 3] = workflow, id, created
  runs[#runs + 1] = workflow .. ' ' .. id .. ' ' .. created
end

-- The runs waiting for the event, as send-event.lua resumes them.
reply[3], reply[4] = resumeEventWaits(base, target, payload, tonumber(ARGV[10]))

local now = nowMs()
redis.call('HSET', recordKey, 'name', name, 'at', intText(now), 'nonce', nonce, 'runs', table.concat(runs, ' '), 'resumed', reply[3])
redis.call('PEXPIRE', recordKey, keepMs)
local byName = base .. 'published-by:' .. name
redis.call('ZADD', byName, intText(now), eventId)
redis.call('ZREMRANGEBYSCORE', byName, '-inf', '(' .. intText(now - keepMs))
redis.call('ZREMRANGEBYRANK', byName, 0, -10001)
redis.call('PEXPIRE', byName, keepMs)
return reply
