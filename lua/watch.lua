#!lua
--[[
  watch: a waiter's read of a run, which can also ask for the run's outcome to be published (the
  `waited` flag; see finishRun). Called after subscribing to the run's done channel, so a run
  that finishes later is announced and one that finished already is read here.

  Includes: none

  KEYS[1] run:<id>  hash
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] 1 to ask for the outcome to be published, 0 just to read
  Reply: { state, result, error, workflow, progress, progressSeq } (state nil: no such run;
         progress nil: none reported; see progress.lua)
]]
if ARGV[1] == '1' and redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'waited', 1) end
return redis.call('HMGET', KEYS[1], 'state', 'result', 'error', 'workflow', 'progress', 'progressSeq')
