#!lua
--[[
  progress: stores a run's latest progress value (ctx.progress) — only if the caller still holds
  the run's lease (state 'active', token match), so a stale attempt or a finished run never
  takes a write. Each stored value gets the next number of the run's 'progressSeq', and is
  published on the run's progress channel (not its done channel: waiters of older builds read
  every done message as an outcome) only if someone waits on the run's channels (`waited` holds
  '1', set by run() at enqueue when it asks for progress, or by watch.lua): a waiter asks
  watch.lua after subscribing, so a value stored before that is in its read, and one stored
  after is published. A value equal to the stored one is not
  stored or published again: that makes a retry after a lost reply harmless, and a repeated value
  says nothing new.

  Includes: util, leases

  KEYS[1] run:<id>  hash (fields 'progress', 'progressSeq')
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  ARGV[3] lease token
  ARGV[4] encoded progress value (JSON, never '')
  Reply: 1 stored (or already the stored value), 0 lease lost: nothing written
]]
-- @include util
-- @include leases

local workflow, _, waited = leasedRun(KEYS[1], ARGV[3])
if not workflow then return 0 end
if redis.call('HGET', KEYS[1], 'progress') == ARGV[4] then return 1 end
local seq = redis.call('HINCRBY', KEYS[1], 'progressSeq', 1)
redis.call('HSET', KEYS[1], 'progress', ARGV[4])
-- Only a waiter on the done channel ('1' in `waited`, see finishRun) hears progress: an inbox
-- waiter (run() without onProgress) does not listen for it.
if waitedOnDone(waited) then
  publish(ARGV[1] .. 'progress:' .. ARGV[2], '{"v":1,"seq":' .. seq .. ',"value":' .. ARGV[4] .. '}')
end
return 1
