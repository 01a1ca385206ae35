#!lua
--[[
  enqueue-dedupe: an enqueue with a dedupe key (EnqueueOptions.dedupe, docs/dedupe.md), taken
  only then: lua/enqueue.lua, the plain enqueue, pays nothing for it. The window is the string
  dedupe:<workflow>:<key>, holding its run's id and expiring with the window; the run's hash says
  which enqueues it folded ('dedupeKey', 'dedupeMode', 'dedupeCount': how many, 'dedupeInput': the
  number of the one whose input it holds, 'dedupeLast': the nonce of the latest). Every decision
  is made here, so concurrent enqueues with one key are ordered by Redis: one run per window.

  - The window is open if the key names a run of this workflow and mode that is still its: for
    'throttle', any such run not cancelled (nor removed, nor expired); for 'debounce', one still
    pending: delayed and never started (a run delayed by a retry's backoff or a durable wait has
    started; a run made due is the workers' already).
    - throttle: the run is returned; its count goes up by one (its input stays the first one).
    - debounce: the run's input is replaced by this call's (unless ARGV[12] is '0') and its due
      time pushed back to now + ttl, at most max wait after its creation; the key lives on.
  - Else the window opens: the run is created under ARGV[2] as lua/enqueue.lua does (enqueueRun,
    fast path included: a debounced run is delayed, never fast-pathed), unless a run with that id
    exists (an `id` given by the caller): it is returned, and no window opens.
  A try sent again after a lost reply is known by its nonce (ARGV[8]): the retry of the call that
  created the run, or of the latest call folded into it, gets its first answer, nothing written.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, records, enqueue,
  enqueue-options

  KEYS[1] run:<id>          hash, the run this call creates if it opens the window
  KEYS[2] dedupe:<workflow>:<key>  string: the window's run id
  KEYS[3], KEYS[4] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  Also, discovered from KEYS[2]: run:<the window's run id> (same slot), its workflow's delayed and
          wake keys; and what enqueueRun names (see lua/enqueue.lua)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id of a new run
  ARGV[3] workflow name
  ARGV[4] encoded input
  ARGV[5] flags, as lua/enqueue.lua's ARGV[5]
  ARGV[6] lease length in ms of a fast-pathed run, as lua/enqueue.lua's ARGV[6]
  ARGV[7] nonce of the enqueue call (always sent)
  ARGV[8] mode: 'throttle' | 'debounce'
  ARGV[9] the dedupe key, as the caller gave it (stored as 'dedupeKey')
  ARGV[10] ttl in ms: throttle, the window; debounce, the delay after each enqueue
  ARGV[11] debounce: '1' a later input replaces the pending run's, '0' it does not
  ARGV[12] debounce: max wait in ms after the window's first enqueue, or '' for none
  ARGV[13 ..] the options that differ from their defaults, name/value pairs as lua/enqueue.lua's
          ARGV[9 ..] (a debounce's caller sends 'delay' = ttl)
  Reply: { outcome: 'created' | 'deduplicated' | 'replaced' | 'existing', run id, its state,
         this call's number among those folded into the run (1 for its creator, 0 for
         'existing') } and, for a run handed to a parked worker, its lease token and the worker's
         id (as lua/enqueue.lua's reply)
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
-- @include enqueue
-- @include enqueue-options

local base, id, workflow, input, nonce = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[7]
local mode, dedupeKey, ttlMs, replace, maxWaitMs = ARGV[8], ARGV[9], tonumber(ARGV[10]), ARGV[11] == '1', tonumber(ARGV[12])
local fastPath, lean, check = string.byte(ARGV[5], 1, 3)
if #ARGV[5] > 3 then handoffSelf = string.sub(ARGV[5], 4) end

-- 1. An open window: its run, found through the key.
local current = redis.call('GET', KEYS[2])
if current then
  local runKey = base .. 'run:' .. current
  local f = redis.call('HMGET', runKey, 'state', 'workflow', 'startedAt', 'nonce', 'dedupeMode', 'dedupeCount', 'dedupeLast',
    'dedupeInput', 'createdAt', 'dueAt')
  local state = f[1]
  if state and f[2] == workflow and f[5] == mode then
    local count = tonumber(f[6]) or 1
    -- A retry after a lost reply: the first try's answer.
    if f[4] == nonce then return { 'created', current, state, 1 } end
    if f[7] == nonce then return { f[8] == tostring(count) and count > 1 and 'replaced' or 'deduplicated', current, state, count } end
    if mode == 'throttle' then
      if state ~= 'cancelled' then
        count = count + 1
        redis.call('HSET', runKey, 'dedupeCount', count, 'dedupeLast', nonce)
        return { 'deduplicated', current, state, count }
      end
    elseif state == 'delayed' and not f[3] then
      count = count + 1
      local now = nowMs()
      local due = now + ttlMs
      local created = tonumber(f[9])
      if maxWaitMs and created and due > created + maxWaitMs then due = math.max(created + maxWaitMs, tonumber(f[10]) or 0) end
      local delayedKey = wfKey(base, workflow, 'delayed')
      local head = redis.call('ZRANGE', delayedKey, 0, 0, 'WITHSCORES')
      -- Reads done: the writes.
      if replace then
        redis.call('HSET', runKey, 'input', input, 'dueAt', intText(due), 'dedupeCount', count, 'dedupeInput', count, 'dedupeLast', nonce)
      else
        redis.call('HSET', runKey, 'dueAt', intText(due), 'dedupeCount', count, 'dedupeLast', nonce)
      end
      redis.call('ZADD', delayedKey, due, current)
      if #head == 0 or tonumber(head[2]) > due then wake(wfKey(base, workflow, 'wake')) end
      -- The key outlives the due time by a window: a run not started by then is found still.
      redis.call('PEXPIRE', KEYS[2], intText(due - now + ttlMs))
      return { replace and 'replaced' or 'deduplicated', current, 'delayed', count }
    end
  end
end

-- 2. A new window. A run under this id that exists already is returned as lua/enqueue.lua does.
if check == 49 then
  local created, state = existingRun(KEYS[1], nonce)
  if created then return { created == 1 and 'created' or 'existing', id, state, created } end
end
local priority, delayMs, runAt, attempts, group, trace, timeoutMs = enqueueOptions(13, 'enqueue-dedupe')
local _, state, token, listener = enqueueRun(base, id, workflow, input, priority, delayMs, runAt, attempts, group, fastPath == 49,
  ARGV[6], '', nonce, trace, timeoutMs, lean == 49, false)
redis.call('HSET', KEYS[1], 'dedupeKey', dedupeKey, 'dedupeMode', mode, 'dedupeCount', 1, 'dedupeInput', 1, 'dedupeLast', nonce)
-- Throttle: the window is ttl from now. Debounce: the run is due in ttl (the 'delay' sent), and
-- the key outlives that by a window, as above.
redis.call('SET', KEYS[2], id, 'PX', mode == 'debounce' and intText(2 * ttlMs) or intText(ttlMs))
if token then return { 'created', id, state, 1, token, listener } end
return { 'created', id, state, 1 }
