#!lua flags=allow-oom
--[[
  remove: delete a finished run (completed, failed or cancelled): its hash, step memo included,
  and its finish index entry (wf:<name>:<state>, named from the hash: a key discovered, of the
  namespace's slot). Its id can be enqueued again. A run not finished is left alone: cancel it
  first.

  Includes: util

  KEYS[1] run:<id>  hash
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  Reply: { 'removed', its state } | { 'missing', '' } | { 'state', the run's state }
]]
-- @include util

local f = redis.call('HMGET', KEYS[1], 'state', 'workflow')
local state, workflow = f[1], f[2]
if not state or not workflow then return { 'missing', '' } end
if state ~= 'completed' and state ~= 'failed' and state ~= 'cancelled' then return { 'state', state } end
redis.call('DEL', KEYS[1])
redis.call('ZREM', wfKey(ARGV[1], workflow, state), ARGV[2])
return { 'removed', state }
