-- records: writing a run's hash (`-- @include records`).
-- @needs time
--
-- Lease tokens count up from a base unique to this incarnation of the id (its creation time, in
-- µs-sized steps), so a worker stuck on an expired run of the same id holds no valid token.
--
-- Bytes of a journal per hash field: under Redis's hash-max-listpack-value (64), so a run's hash
-- keeps its compact encoding (one longer field turns it into a hashtable, about 3× the bytes).

-- Writes a new run record (enqueue, or a schedule's fire) and returns its token base.
-- `tag`/`tagValue`: one more field, where the run came from ('nonce' of its enqueue call, or
-- 'schedule' that fired it), not stored when '' (an enqueue of a generated id sends no nonce).
-- `extra`: optional further field/value pairs, in the same HSET and after the others, so one of
-- the same name wins (the enqueue fast path's first lease).
local function storeRun(runKey, workflow, input, state, priority, maxAttempts, group, now, due, tag, tagValue, compact, extra)
  local tokenBase = now * 1000
  -- Text for the common case (stored at the call's time): no number formatting per run.
  local token, created
  if now == nowMs() then token, created = nowText() .. '000', nowText() else token, created = string.format('%.0f', tokenBase), now end
  if due == now then due = created end
  local fields
  if compact then
    -- The compact record leaves out what a reader defaults: attempts, failures and stalls 0, and
    -- priority 0 (every reader of this version defaults them; older versions need them: README, Migrations).
    fields = { 'workflow', workflow, 'input', input, 'state', state, 'maxAttempts', maxAttempts, 'token', token,
      'createdAt', created, 'dueAt', due }
    if tonumber(priority) ~= 0 then fields[#fields + 1], fields[#fields + 2] = 'priority', priority end
  else
    fields = { 'workflow', workflow, 'input', input, 'state', state, 'priority', priority, 'maxAttempts', maxAttempts,
      'attempts', '0', 'failures', '0', 'stalls', '0', 'token', token, 'createdAt', created, 'dueAt', due }
  end
  if tagValue ~= '' then fields[#fields + 1], fields[#fields + 2] = tag, tagValue end
  if group ~= '' then fields[#fields + 1], fields[#fields + 2] = 'group', group end
  if extra then
    for _, value in ipairs(extra) do fields[#fields + 1] = value end
  end
  redis.call('HSET', runKey, unpack(fields))
  return tokenBase
end

local JOURNAL_CHUNK = 60

-- Writes fields of a run's hash and, when given, the committing attempt's journal ('<slot>
-- <json>', see lib/execution/attempt.journal.ts) as fields 'tl:<slot>' (the chunk count) and
-- 'tl:<slot>.<k>' (its chunks): one HSET either way, so the dashboard's step timeline costs no
-- command of its own. Chunks a longer journal left in a reused slot are never read (the count says).
local function hsetRun(runKey, journal, ...)
  local space = journal and string.find(journal, ' ', 1, true)
  if not space then return redis.call('HSET', runKey, ...) end
  local slot = 'tl:' .. string.sub(journal, 1, space - 1)
  local args = { slot, 0 }
  local chunks = 0
  for i = space + 1, #journal, JOURNAL_CHUNK do
    args[#args + 1] = slot .. '.' .. chunks
    args[#args + 1] = string.sub(journal, i, i + JOURNAL_CHUNK - 1)
    chunks = chunks + 1
  end
  args[2] = chunks
  for _, value in ipairs({ ... }) do args[#args + 1] = value end
  return redis.call('HSET', runKey, unpack(args))
end
