#!lua
--[[
  watch: a waiter's read of a run, which can also ask for the run's outcome to be published on
  its done channel ('1' in the run's `waited` field) or on the caller's inbox, beside whatever
  else the field names (see finishRun). Called once the caller listens there (subscribed to the
  done channel, or its inbox live), so a run that finishes later is announced and one that
  finished already is read here.

  Includes: util

  KEYS[1] run:<id>  hash
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] 0 just to read; 1 to have the outcome published on the done channel too; 2 to have it
          published there only: the caller is the run() whose inbox the field names, moving to
          the done channel (older versions publish only for a field of exactly '1'); 3 to have it
          published on the caller's inbox (ARGV[2]) too: a wait() over its process's inbox
  ARGV[2] with 3: the caller's inbox id (lib/client/run.inbox.ts)
  Reply: { state, result, error, workflow, progress, progressSeq } (state nil: no such run;
         progress nil: none reported; see progress.lua)
]]
-- @include util

-- One read of the record, 'waited' included: the HSET below changes only that field, so the
-- fields returned are as they stand after the call, and a read costs one command.
local f = redis.call('HMGET', KEYS[1], 'state', 'result', 'error', 'workflow', 'progress', 'progressSeq', 'waited')
local was = f[7]
f[7] = nil
if ARGV[1] == '3' then
  -- A finished run announces nothing more: only an unfinished one is worth the write.
  local state = f[1]
  if state and state ~= 'completed' and state ~= 'failed' and state ~= 'cancelled' and not waitedBy(was, ARGV[2]) then
    redis.call('HSET', KEYS[1], 'waited', was and was ~= '' and (was .. ' ' .. ARGV[2]) or ARGV[2])
  end
elseif ARGV[1] ~= '0' and f[1] and was ~= '1' then
  local waited = '1'
  if ARGV[1] == '1' and was then
    if waitedOnDone(was) then waited = nil else waited = was .. ' 1' end
  end
  if waited then redis.call('HSET', KEYS[1], 'waited', waited) end
end
return f
