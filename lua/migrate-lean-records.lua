#!lua
--[[
  migrate-lean-records: the migration step from layout 3 to 4, one batch: rewrites the run records
  among one SCAN page of the namespace's `run:*` keys as lean records (see storeRun in
  lua/includes/records.lua), dropping what this version's readers derive: attempts, failures,
  stalls and priority at 0, maxAttempts at 3, a dueAt equal to createdAt, and a token still at its
  base (createdAt × 1000: the run was never claimed). `createdAt` stays (ids written before layout
  4 carry no time). A record read before and after reads the same; run again it changes nothing
  (idempotent). Under the migration lock (see migrate-lock.lua): with another token, nothing is
  written.

  Includes: none

  KEYS[1] migrate-lock   string: the migration lock
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] the caller's lock token
  ARGV[2] SCAN cursor: '0' to start
  ARGV[3] the SCAN pattern of the namespace's run records ('<key base, glob-escaped>run:*')
  ARGV[4] keys looked at per call (SCAN COUNT)
  Reply: { 0 } when the token does not hold the lock (nothing written); otherwise
         { 1, next cursor ('0' = done) }
]]

local DEFAULTS = { attempts = '0', failures = '0', stalls = '0', priority = '0', maxAttempts = '3' }
local FIELDS = { 'attempts', 'failures', 'stalls', 'priority', 'maxAttempts', 'createdAt', 'dueAt', 'token' }

if redis.call('GET', KEYS[1]) ~= ARGV[1] then return { 0 } end
local page = redis.call('SCAN', ARGV[2], 'MATCH', ARGV[3], 'COUNT', ARGV[4], 'TYPE', 'hash')
for _, key in ipairs(page[2]) do
  local f = redis.call('HMGET', key, unpack(FIELDS))
  local drop = {}
  for i = 1, 5 do
    if f[i] == DEFAULTS[FIELDS[i]] then drop[#drop + 1] = FIELDS[i] end
  end
  local created = f[6]
  if created then
    if f[7] == created then drop[#drop + 1] = 'dueAt' end
    if f[8] == created .. '000' then drop[#drop + 1] = 'token' end
  end
  if #drop > 0 then redis.call('HDEL', key, unpack(drop)) end
end
return { 1, page[1] }
