#!lua
--[[
  suspend: a run starts a durable wait (see lua/includes/waits.lua), if the caller still holds its
  lease. The attempt's position entries are written to the memo first (the determinism guard). If the
  wait can end at once — a sleep whose time has passed, a signal already in the run's mailbox,
  children that have all finished, a timeout of 0 — its outcome goes to the memo and the run
  carries on under its lease. Otherwise the run gives up its lease and every slot, as a release
  does but without counting an attempt's failure, keeps the state 'delayed' with the wait recorded,
  and becomes due again when the wait ends (its deadline: through the delayed set; its value:
  signal.lua, send-event.lua, or a child's finishRun).

  Children (kind 'child'): each is created as a new run of its workflow, due now, linked to the
  parent ('parent' = '<parent id> <memo key>'), unless its id exists: a finished run gives its
  outcome at once, an unfinished one with no parent or this parent is waited for, one with
  another parent — or the run itself, or one of its ancestors — is a conflict (nothing written).

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, records, waits, slots

  KEYS[1] run:<id>  hash
  KEYS[2] leases    zset
  KEYS[3] limits    hash
  KEYS[4] seq       string
  KEYS[5], KEYS[6] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  ARGV[3] lease token
  ARGV[4] kind: 'sleep' | 'signal' | 'event' | 'child'
  ARGV[5] deadline as ms from now (Redis time), or ''
  ARGV[6] deadline as ms since the epoch, or '' (wins over ARGV[5])
  ARGV[7] target: signal name | '<event name>|<key>' | '' (sleep, child)
  ARGV[8] room: bytes the memo may still take (the worker's maxRunMemoBytes less the memo it
          holds): the position entries below count first — those that do not fit are refused
          whole (reply 'over', nothing written) — then the wait's outcomes (see fitOutcome in
          waits.lua); what is left is stored as the wait's room
  ARGV[9] the attempt's journal '<slot> <json>' or '' (see hsetRun in records.lua), stored if
          the run suspends
  ARGV[10] P, the number of position entries that follow: the attempt's calls up to this wait
          that the memo does not hold yet, as pairs: field '@<p>', value '<kind>:<name>#<n>' (see
          lib/execution/determinism.guard.ts; only waits write them)
  ARGV[11 .. 10+2P] the pairs
  ARGV[11+2P] E, the number of entries that follow: one per memo key (several for invokeAll)
  ARGV[12+2P ..] per entry: memo key '<name>#<n>'; for 'child', seven more values: child id,
             workflow, encoded input, max attempts, group or '', priority, 1 if the workflow
             must be registered in the namespace (the caller does not declare it) else 0
  Reply: { 'suspended' } | { 'resumed', { memo key, envelope, … } } (the wait ended at once; the
         lease holds) | { 'lost' } (nothing written) | { 'conflict', child id } | { 'unknown',
         workflow } (a child's workflow no worker registered; nothing written) | { 'over', memo
         key, bytes } (the position entries, `bytes` of them, would take the memo past its
         budget; nothing written: the worker fails the run with StepMemoLimitError). A retry of a call
         that landed (its reply was lost) answers what that call did.
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

-- How far up the chain of parents the cycle check looks.
local MAX_DEPTH = 100

local base, id, token, kind = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local runKey = KEYS[1]
local room = tonumber(ARGV[8])
local positionCount = tonumber(ARGV[10])
local entriesAt = 12 + 2 * positionCount
local width = kind == 'child' and 8 or 1
local entries = {}
for i = 0, tonumber(ARGV[entriesAt - 1]) - 1 do
  local at = entriesAt + i * width
  entries[#entries + 1] = { memo = ARGV[at], at = at }
end

local workflow, group = leasedRun(runKey, token)
if not workflow then
  return { redis.call('HGET', runKey, 'ended') == token .. ':suspended' and 'suspended' or 'lost' }
end

-- Outcomes already in the memo (a retry of a call that resumed at once, or children that
-- finished in the meantime) count as ended.
local outcomes, missing = {}, {}
for _, entry in ipairs(entries) do
  local value = redis.call('HGET', runKey, 'step:' .. entry.memo)
  if value then
    outcomes[#outcomes + 1] = entry.memo
    outcomes[#outcomes + 1] = value
  else
    missing[#missing + 1] = entry
  end
end

local now = nowMs()
local deadline = NEVER
if ARGV[6] ~= '' then deadline = tonumber(ARGV[6]) elseif ARGV[5] ~= '' then deadline = now + tonumber(ARGV[5]) end

local function record(entry, envelope)
  envelope, room = fitOutcome(entry.memo, envelope, room)
  redis.call('HSET', runKey, 'step:' .. entry.memo, envelope)
  outcomes[#outcomes + 1] = entry.memo
  outcomes[#outcomes + 1] = envelope
end

-- Children: checked before anything is written. A run may not wait for itself or for one of
-- its ancestors (a wait cycle that nothing would end).
local children = {}
if kind == 'child' then
  local ancestors = { [id] = true }
  local up = redis.call('HGET', runKey, 'parent')
  for _ = 1, MAX_DEPTH do
    if not up then break end
    local ancestor = string.match(up, '^(%S+)')
    ancestors[ancestor] = true
    up = redis.call('HGET', base .. 'run:' .. ancestor, 'parent')
  end
  for _, entry in ipairs(missing) do
    local childId = ARGV[entry.at + 1]
    local ref = id .. ' ' .. entry.memo
    local c = redis.call('HMGET', base .. 'run:' .. childId, 'state', 'parent', 'result', 'error', 'workflow')
    if ancestors[childId] or (c[1] and c[2] and c[2] ~= ref) then return { 'conflict', childId } end
    local childWorkflow = ARGV[entry.at + 2]
    if not c[1] and ARGV[entry.at + 7] == '1' and redis.call('SISMEMBER', base .. 'workflows', childWorkflow) == 0 then
      return { 'unknown', childWorkflow }
    end
    children[#children + 1] = { entry = entry, id = childId, ref = ref, found = c }
  end
end

-- Position entries count against the memo's budget (one the memo holds already, from a resent
-- call, costs nothing): past it the run fails here, the same on every replay.
local positions, positionBytes = {}, 0
for from = 11, 10 + 2 * positionCount, 1000 do
  local to = math.min(from + 998, 10 + 2 * positionCount)
  local fields = {}
  for i = from, to, 2 do fields[#fields + 1] = 'step:' .. ARGV[i] end
  local held = redis.call('HMGET', runKey, unpack(fields))
  for k in ipairs(fields) do
    local at = from + 2 * (k - 1)
    if held[k] ~= ARGV[at + 1] then
      positions[#positions + 1] = at
      positionBytes = positionBytes + #ARGV[at] + #ARGV[at + 1]
    end
  end
end
if positionBytes > room then return { 'over', entries[1].memo, positionBytes } end
room = room - positionBytes

for _, at in ipairs(positions) do redis.call('HSET', runKey, 'step:' .. ARGV[at], ARGV[at + 1]) end
if #missing == 0 then return { 'resumed', outcomes } end

local pending = 0
if kind == 'sleep' then
  if deadline <= now then record(missing[1], ENDED_BY_TIME) else pending = 1 end
elseif kind == 'signal' then
  -- The mailbox: '<name> <envelope>' entries in arrival order; the oldest of this name is taken.
  local mailbox = base .. 'mailbox:' .. id
  local prefix = ARGV[7] .. ' '
  for _, mail in ipairs(redis.call('LRANGE', mailbox, 0, -1)) do
    if string.sub(mail, 1, #prefix) == prefix then
      redis.call('LREM', mailbox, 1, mail)
      record(missing[1], string.sub(mail, #prefix + 1))
      break
    end
  end
  if #outcomes == 0 then
    if deadline <= now then record(missing[1], ENDED_BY_TIME) else pending = 1 end
  end
elseif kind == 'event' then
  if deadline <= now then record(missing[1], ENDED_BY_TIME) else pending = 1 end
else
  for _, child in ipairs(children) do
    local c = child.found
    if c[1] == 'completed' then
      record(child.entry, payloadEnvelope(c[3] or ''))
    elseif c[1] == 'failed' or c[1] == 'cancelled' then
      record(child.entry, childEnvelope(c[1], c[4] or ''))
    else
      local childKey = base .. 'run:' .. child.id
      if c[1] then
        redis.call('HSET', childKey, 'parent', child.ref, 'links', 1)
      else
        local at = child.entry.at
        local childWorkflow, childGroup, priority = ARGV[at + 2], ARGV[at + 5], ARGV[at + 6]
        storeRun(base, child.id, childWorkflow, ARGV[at + 3], 'waiting', priority, ARGV[at + 4], childGroup, nil, 'parent', child.ref)
        redis.call('HSET', childKey, 'links', 1)
        makeDue(base, KEYS[3], KEYS[4], childWorkflow, childGroup, child.id, priority, false)
      end
      pending = pending + 1
    end
  end
end
if pending == 0 then return { 'resumed', outcomes } end

-- The run waits: lease and slots go, the wait is recorded and indexed.
local freed = {}
releaseSlots(base, KEYS[2], KEYS[3], KEYS[4], id, workflow, group, freed)
local target = ARGV[7]
if kind == 'child' then
  local ids = {}
  for _, child in ipairs(children) do ids[#ids + 1] = child.id end
  target = table.concat(ids, ' ')
  redis.call('HSET', runKey, 'waitLeft', pending)
end
redis.call('HSET', runKey, 'waitRoom', room)
local desc = kind .. ' ' .. string.format('%.0f', deadline) .. ' ' .. missing[1].memo .. ' ' .. target
hsetRun(runKey, ARGV[9], 'state', 'delayed', 'wait', desc, 'ended', token .. ':suspended')
redis.call('ZADD', wfKey(base, workflow, WAIT_INDEX[kind]), deadline, id)
if kind == 'event' then redis.call('SADD', eventIndex(base, target), id) end
if deadline < NEVER then
  redis.call('HSET', runKey, 'dueAt', deadline)
  local delayedKey = wfKey(base, workflow, 'delayed')
  local head = redis.call('ZRANGE', delayedKey, 0, 0, 'WITHSCORES')
  redis.call('ZADD', delayedKey, deadline, id)
  -- Workers sleep until the earliest due time they know of; an earlier one must wake them.
  if #head == 0 or tonumber(head[2]) > deadline then wake(wfKey(base, workflow, 'wake')) end
end
wakeCapped(base, KEYS[3], freed)
return { 'suspended' }
