#!lua
--[[
  schedule-write: creates or updates schedules — one from QueueClient.schedule ('api'), or those
  a worker's code declares, at its bootstrap ('code'). Every conflict is checked before the first
  write, so a refused call writes nothing. A schedule whose definition (fingerprint) is unchanged
  keeps its plan and state; a new or changed one takes the plan given (computed from Redis time
  by the caller) and owes nothing from before the change. Hash and index are written together
  (see schedules.lua). 'code' also removes the code-declared schedules of the given workflows
  that the code no longer declares; a paused schedule stays paused.

  Which code may remove a declared schedule: each workflow's declarations (the set of schedules
  one version of its code declares, by fingerprint) are numbered in the order they first reach
  the namespace (wf:<name>:declarations, fingerprint → number); a declared schedule records in
  `decl` the newest declaration that declared it (none: 0, as the previous version wrote). A
  bootstrap removes one its code does not declare only if that number is below its own: a
  declaration that appeared later dropped it. An older pod booting during a rolling deploy leaves
  the newer code's schedules alone ('newer'). Definitions: the latest bootstrap wins, except
  over an operator's: 'api' on a code-declared schedule records in `overrides` the declared
  fingerprint it replaced (setting that one again hands it back), and a bootstrap still declaring
  it keeps the operator's definition ('kept'); one declaring something else replaces it.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, records, schedules

  KEYS[1] schedules   zset (score 0): every schedule id of the namespace, for paging
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] 'api' or 'code'
  ARGV[3] n, the number of schedules
  ARGV[4] m, the number of workflows whose code declares its schedules here ('code'; else 0)
  ARGV[5 .. 4+2m] per such workflow: its name, the fingerprint of its declaration
  then n × 13: id, workflow, fingerprint, cron, tz or '', encoded input, group or '', priority,
          attempts, overlap 1|0, catchUp 'latest'|'all', catchUpLimit, plan (ascending ms, comma-separated)
  Reply: { 'conflict', id, workflow the id belongs to } and nothing written, or
         { id, change, … } per schedule written or removed, change 'added' | 'changed' |
         'unchanged' | 'removed', 'newer' (not declared here, left to the newer code declaring it),
         or 'kept' (changed at runtime over this same declaration: left as it is)
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
-- @include schedules

local base, mode, now = ARGV[1], ARGV[2], nowMs()
local n, m = tonumber(ARGV[3]), tonumber(ARGV[4])
local FIELDS = 13
local items, ids = {}, {}
for i = 0, n - 1 do
  local a = 5 + 2 * m + i * FIELDS
  items[#items + 1] = { id = ARGV[a], workflow = ARGV[a + 1], fingerprint = ARGV[a + 2], cron = ARGV[a + 3], tz = ARGV[a + 4],
    input = ARGV[a + 5], group = ARGV[a + 6], priority = ARGV[a + 7], attempts = ARGV[a + 8], overlap = ARGV[a + 9],
    catchUp = ARGV[a + 10], catchUpLimit = ARGV[a + 11], plan = ARGV[a + 12] }
  ids[ARGV[a]] = true
end

-- Each declaring workflow's declaration: its number, given at first sight (registered below).
local declarations, declaring = {}, {}
for i = 5, 3 + 2 * m, 2 do
  local key = wfKey(base, ARGV[i], 'declarations')
  local number = tonumber(redis.call('HGET', key, ARGV[i + 1]))
  declarations[ARGV[i]] = { key = key, fingerprint = ARGV[i + 1], number = number or redis.call('HLEN', key) + 1, new = number == nil }
  declaring[#declaring + 1] = ARGV[i]
end

-- Takes a schedule out of a workflow's listing, index and declared set.
local function detach(workflow, id)
  redis.call('ZREM', wfKey(base, workflow, 'schedules'), id)
  redis.call('ZREM', wfKey(base, workflow, 'next-fires'), id)
  redis.call('SREM', wfKey(base, workflow, 'declared'), id)
end

-- An id belongs to one workflow; only a code-declared schedule may move to another by code.
for _, item in ipairs(items) do
  if mode == 'code' and not declarations[item.workflow] then return redis.error_reply('ERR schedule-write: ' .. item.id .. ' of an undeclared workflow') end
  local f = redis.call('HMGET', scheduleKey(base, item.id), 'workflow', 'source')
  if f[1] and f[1] ~= item.workflow and (mode == 'api' or f[2] ~= 'code') then return { 'conflict', item.id, f[1] } end
end

local reply = {}
for _, item in ipairs(items) do
  local key = scheduleKey(base, item.id)
  local cur = redis.call('HMGET', key, 'workflow', 'fingerprint', 'source', 'paused', 'rev', 'decl', 'overrides')
  local change = 'unchanged'
  if mode == 'code' and cur[1] == item.workflow and cur[7] == item.fingerprint then
    change = 'kept'
  elseif mode == 'api' and cur[3] == 'code' and cur[1] == item.workflow then
    -- An operator's definition of a declared schedule: remember the declaration it replaces.
    local declared = cur[7] or cur[2]
    if item.fingerprint == declared then redis.call('HDEL', key, 'overrides') else redis.call('HSET', key, 'overrides', declared) end
  elseif mode == 'code' and cur[7] then
    redis.call('HDEL', key, 'overrides')
  end
  if change ~= 'kept' and (cur[1] ~= item.workflow or cur[2] ~= item.fingerprint) then
    change = cur[1] and 'changed' or 'added'
    if cur[1] and cur[1] ~= item.workflow then detach(cur[1], item.id) end
    local times = csvNumbers(item.plan)
    redis.call('HSET', key, 'workflow', item.workflow, 'fingerprint', item.fingerprint, 'cron', item.cron, 'tz', item.tz,
      'input', item.input, 'group', item.group, 'priority', item.priority, 'attempts', item.attempts, 'overlap', item.overlap,
      'catchUp', item.catchUp, 'catchUpLimit', item.catchUpLimit, 'rev', (tonumber(cur[5]) or 0) + 1, 'since', now,
      'updatedAt', now)
    redis.call('HDEL', key, 'asked')
    if not cur[1] then redis.call('HSET', key, 'createdAt', now, 'fired', 0, 'skipped', 0, 'source', mode) end
    if cur[4] == '1' then
      redis.call('HDEL', key, 'next', 'plan')
    else
      redis.call('HSET', key, 'next', msText(times[1]), 'plan', numbersCsv(times, 2))
      redis.call('ZADD', wfKey(base, item.workflow, 'next-fires'), msText(times[1]), item.id)
      wake(wfKey(base, item.workflow, 'wake'))
    end
    redis.call('ZADD', KEYS[1], 0, item.id)
    redis.call('ZADD', wfKey(base, item.workflow, 'schedules'), 0, item.id)
  end
  -- The latest bootstrap owns a code-declared id, even one first created at runtime; the id
  -- records the newest declaration of its workflow that declares it.
  if mode == 'code' then
    if cur[3] ~= 'code' then redis.call('HSET', key, 'source', 'code') end
    redis.call('SADD', wfKey(base, item.workflow, 'declared'), item.id)
    local number = declarations[item.workflow].number
    if cur[1] ~= item.workflow or (tonumber(cur[6]) or 0) < number then redis.call('HSET', key, 'decl', number) end
  end
  reply[#reply + 1] = item.id
  reply[#reply + 1] = change
end

-- Code-declared schedules of these workflows that the code dropped, unless a newer declaration
-- declares them.
for _, workflow in ipairs(declaring) do
  local declaration = declarations[workflow]
  if declaration.new then redis.call('HSET', declaration.key, declaration.fingerprint, declaration.number) end
  for _, id in ipairs(redis.call('SMEMBERS', wfKey(base, workflow, 'declared'))) do
    if not ids[id] then
      local f = redis.call('HMGET', scheduleKey(base, id), 'workflow', 'source', 'decl')
      if f[1] == workflow and f[2] == 'code' and (tonumber(f[3]) or 0) >= declaration.number then
        reply[#reply + 1] = id
        reply[#reply + 1] = 'newer'
      else
        redis.call('SREM', wfKey(base, workflow, 'declared'), id)
        if f[1] == workflow and f[2] == 'code' then
          redis.call('DEL', scheduleKey(base, id))
          detach(workflow, id)
          redis.call('ZREM', KEYS[1], id)
          reply[#reply + 1] = id
          reply[#reply + 1] = 'removed'
        end
      end
    end
  end
end
return reply
