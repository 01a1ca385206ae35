#!lua
--[[
  migrate-group-due: the migration step from layout 1 to 2 for one workflow: sets the count of
  its runs due in group lanes (the `groupDue` field of its stats hash, marked exact by
  `groupDueExact`: see stats.lua, makeDue and settleGroups), which layout 1 did not keep. Under
  the migration lock (see migrate-lock.lua): with another token, nothing is written.

  A workflow whose `groups` set fits one batch (GROUP_BATCH_SIZE) is counted and written in one
  call, atomically. A larger one is visited in batches from an SSCAN cursor: each 'count' call
  replies the due runs of about GROUP_BATCH_SIZE groups, the caller sums them (a group SSCAN
  returns twice counts once) and stores the total with 'write'. Every call is repeatable.

  Includes: util, lanes

  KEYS[1] migrate-lock       string: the migration lock
  KEYS[2] wf:<name>:stats    hash
  KEYS[3], KEYS[4] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] the caller's lock token
  ARGV[3] workflow name
  ARGV[4] 'count' (visit one batch) | 'write' (store the total)
  ARGV[5] count: the SSCAN cursor of the workflow's `groups` set, '0' to start; write: the total
  Reply: { 0 } when the token does not hold the lock (nothing written); otherwise
         count: { 1, next cursor ('0' = done), 1 if this call already stored the count (the set
                fit one batch) else 0, then either the total (stored) or group, due, group, due… }
         write: { 1 }
]]
-- @include util
-- @include lanes

local GROUP_BATCH_SIZE = 500

if redis.call('GET', KEYS[1]) ~= ARGV[2] then return { 0 } end
local base, workflow = ARGV[1], ARGV[3]

if ARGV[4] == 'write' then
  redis.call('HSET', KEYS[2], 'groupDue', ARGV[5], 'groupDueExact', 1)
  return { 1 }
end

local groupsKey = wfKey(base, workflow, 'groups')
if ARGV[5] == '0' and redis.call('SCARD', groupsKey) <= GROUP_BATCH_SIZE then
  return { 1, '0', 1, recountGroupDue(base, workflow) }
end

local page = redis.call('SSCAN', groupsKey, ARGV[5], 'COUNT', GROUP_BATCH_SIZE)
local reply = { 1, page[1], 0 }
for _, group in ipairs(page[2]) do
  reply[#reply + 1] = group
  reply[#reply + 1] = dueCount(laneOf(base, workflow, group))
end
return reply
