--[[
  enqueue: store a new run and index it as waiting (due now) or delayed; wake a worker.
  Idempotent on the run id: if the run exists, nothing is written and its state is returned.

  Fast path: when it is enabled, the run is due now, nothing is queued ahead of it in its
  workflow (no waiting run, nothing in the wake list), its cap has room and a worker is parked on
  the workflow (see park.lua), the run is claimed here and handed over through the wake list (see
  handoffEntry), so it starts without a reserve round trip. The data is exactly what a reserve
  claim writes: complete, fail, retry and stall recovery treat it alike. A handoff is taken by a
  blocked worker, or by any claim of the workflow (takeHandoff); if its worker dies, the stalled
  scan recovers it.

  KEYS[1] run:<id>           hash
  KEYS[2] wf:<name>:waiting  zset
  KEYS[3] delayed            zset
  KEYS[4] wf:<name>:wake     list
  KEYS[5] seq                string
  KEYS[6] leases             zset
  KEYS[7] limits             hash
  KEYS[8] wf:<name>:active   set
  KEYS[9] wf:<name>:parked   zset
  ARGV[1] run id
  ARGV[2] workflow name
  ARGV[3] encoded input
  ARGV[4] priority, 0..1048575 (higher runs first)
  ARGV[5] delay in ms from now (>= 0)
  ARGV[6] due time in ms since the epoch, or '' (wins over the delay)
  ARGV[7] max attempts
  ARGV[8] group, or ''
  ARGV[9] 1 to allow the fast path, 0 not to
  ARGV[10] lease length in ms of a fast-pathed run (until its worker's first heartbeat)
  Reply: { created: 1 new run | 0 existing run, state } (state 'active' = fast-pathed)
]]
-- @include common

local existing = redis.call('HGET', KEYS[1], 'state')
if existing then return { 0, existing } end

local workflow = ARGV[2]
local now = nowMs()
local due = now + tonumber(ARGV[5])
if ARGV[6] ~= '' then due = tonumber(ARGV[6]) end

local state = 'waiting'
if due > now then
  state = 'delayed'
elseif ARGV[9] == '1' and redis.call('ZCARD', KEYS[2]) == 0 and redis.call('LLEN', KEYS[4]) == 0 then
  local limit = limitOf(KEYS[7], workflow)
  if not limit or redis.call('SCARD', KEYS[8]) < limit then
    local parked = redis.call('ZRANGEBYSCORE', KEYS[9], now, '+inf', 'LIMIT', 0, 1)
    if #parked > 0 then
      -- That worker is about to be woken by this handoff: count it as parked no longer.
      redis.call('ZREM', KEYS[9], parked[1])
      state = 'active'
    end
  end
end

redis.call('HSET', KEYS[1], 'workflow', workflow, 'input', ARGV[3], 'state', state, 'priority', ARGV[4],
  'maxAttempts', ARGV[7], 'attempts', 0, 'failures', 0, 'stalls', 0, 'token', 0,
  'createdAt', now, 'dueAt', due)
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'group', ARGV[8]) end

if state == 'active' then
  redis.call('HSET', KEYS[1], 'token', 1, 'attempts', 1, 'startedAt', now)
  redis.call('SADD', KEYS[8], ARGV[1])
  redis.call('ZADD', KEYS[6], now + tonumber(ARGV[10]), ARGV[1])
  redis.call('RPUSH', KEYS[4], handoffEntry('1', ARGV[1], ARGV[3]))
elseif state == 'delayed' then
  -- Workers sleep until the earliest due time they know of; an earlier one must wake them.
  local head = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  redis.call('ZADD', KEYS[3], due, ARGV[1])
  if #head == 0 or tonumber(head[2]) > due then wake(KEYS[4]) end
else
  redis.call('ZADD', KEYS[2], waitingScore(KEYS[5], ARGV[4]), ARGV[1])
  wake(KEYS[4])
end
return { 1, state }
