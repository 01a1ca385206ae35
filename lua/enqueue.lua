--[[
  enqueue: store a new run and index it as waiting (due now) or delayed; wake a worker.
  Idempotent on the run id: if the run exists, nothing is written and its state is returned.

  KEYS[1] run:<id>           hash
  KEYS[2] wf:<name>:waiting  zset
  KEYS[3] delayed            zset
  KEYS[4] wf:<name>:wake     list
  KEYS[5] seq                string
  ARGV[1] run id
  ARGV[2] workflow name
  ARGV[3] encoded input
  ARGV[4] priority, 0..1048575 (higher runs first)
  ARGV[5] delay in ms from now (>= 0)
  ARGV[6] due time in ms since the epoch, or '' (wins over the delay)
  ARGV[7] max attempts
  ARGV[8] group, or ''
  Reply: { created: 1 new run | 0 existing run, state }
]]
-- @include common

local existing = redis.call('HGET', KEYS[1], 'state')
if existing then return { 0, existing } end

local now = nowMs()
local due = now + tonumber(ARGV[5])
if ARGV[6] ~= '' then due = tonumber(ARGV[6]) end

local state = 'waiting'
if due > now then state = 'delayed' end
redis.call('HSET', KEYS[1], 'workflow', ARGV[2], 'input', ARGV[3], 'state', state, 'priority', ARGV[4],
  'maxAttempts', ARGV[7], 'attempts', 0, 'failures', 0, 'stalls', 0, 'token', 0,
  'createdAt', now, 'dueAt', due)
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'group', ARGV[8]) end

if state == 'delayed' then
  -- Workers sleep until the earliest due time they know of; an earlier one must wake them.
  local head = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  redis.call('ZADD', KEYS[3], due, ARGV[1])
  if #head == 0 or tonumber(head[2]) > due then wake(KEYS[4]) end
else
  redis.call('ZADD', KEYS[2], waitingScore(KEYS[5], ARGV[4]), ARGV[1])
  wake(KEYS[4])
end
return { 1, state }
