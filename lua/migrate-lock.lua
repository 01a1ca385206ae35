#!lua
--[[
  migrate-lock: the namespace's migration lock and its layout marker (see lib/migration). One
  process at a time migrates a namespace: it takes the lock with a token of its own, renews it
  while it works, records each layout it reaches in `schema`, and releases the lock. Every write
  a migration makes checks the token (here and in the migrate-* scripts), so a process that lost
  the lock writes nothing. Each operation may be repeated after a lost reply.

  Includes: none

  KEYS[1] migrate-lock  string (with TTL): the token of the process migrating
  KEYS[2] schema        string: the namespace's key layout number
  KEYS[3], KEYS[4] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] operation: 'acquire' | 'renew' | 'stamp' | 'release'
  ARGV[2] the caller's lock token
  ARGV[3] acquire, renew: the lock's time to live in ms; stamp: the layout number to record
  ARGV[4] acquire: the caller's current layout (the lock is not taken once `schema` is at it or
          past it, or holds something other than a number: nothing is left to do, or it is not
          this caller's to do)
  Reply: acquire: { 1 taken (or already held with this token) | 0 not taken, `schema` or '' };
         renew, stamp, release: 1 if the token held the lock (renewed / recorded / deleted), else
         0 and nothing written
]]

local op, token = ARGV[1], ARGV[2]
local holder = redis.call('GET', KEYS[1])

if op == 'acquire' then
  local schema = redis.call('GET', KEYS[2]) or ''
  local layout = tonumber(schema)
  if schema ~= '' and (not layout or layout >= tonumber(ARGV[4])) then return { 0, schema } end
  if holder == token then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return { 1, schema }
  end
  if holder then return { 0, schema } end
  redis.call('SET', KEYS[1], token, 'PX', ARGV[3])
  return { 1, schema }
end

if holder ~= token then return 0 end
if op == 'renew' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
elseif op == 'stamp' then
  redis.call('SET', KEYS[2], ARGV[3])
elseif op == 'release' then
  redis.call('DEL', KEYS[1])
else
  return redis.error_reply('migrate-lock: unknown operation ' .. tostring(op))
end
return 1
