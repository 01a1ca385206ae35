-- records: writing a run's hash (`-- @include records`).
-- @needs time
--
-- Lease tokens count up from a base unique to this incarnation of the id (its creation time, in
-- µs-sized steps), so a worker stuck on an expired run of the same id holds no valid token.
--
-- Bytes of a journal per hash field: under Redis's hash-max-listpack-value (64), so a run's hash
-- keeps its compact encoding (one longer field turns it into a hashtable, about 3× the bytes).

-- The letters of a generated run id, by value (lib/workflow/run-id.ts).
local ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
-- A lean record (layout 4) leaves out maxAttempts at this value (RECORD_DEFAULT_MAX_ATTEMPTS in
-- lib/redis/run.layout.ts, which the enqueue's caller sends only when it differs).
local DEFAULT_MAX_ATTEMPTS = '3'

-- Whether this namespace stores lean run records (layout 4, LEAN_RECORDS_LAYOUT in
-- lib/migration/layout.versions.ts): read once per call.
local leanLayout = nil

-- Each alphabet character's value, by byte: a lean enqueue decodes every generated id, and a byte
-- lookup costs a fraction of a search of the alphabet. Filled by the first call that needs it and
-- kept by the library (a library's top level may not call the string functions).
local ID_DIGITS = {}

-- The creation time a generated run id carries in its first 7 characters (ms since the epoch).
local function runIdTime(id)
  if #id < 7 then return nil end
  local digits = ID_DIGITS
  if digits[65] == nil then
    for i = 1, #ID_ALPHABET do digits[string.byte(ID_ALPHABET, i)] = i - 1 end
  end
  local a, b, c, d, e, f, g = string.byte(id, 1, 7)
  a, b, c, d, e, f, g = digits[a], digits[b], digits[c], digits[d], digits[e], digits[f], digits[g]
  if not (a and b and c and d and e and f and g) then return nil end
  return ((((((a * 64 + b) * 64 + c) * 64 + d) * 64 + e) * 64 + f) * 64 + g)
end

-- A run's creation time: its `createdAt` field, or (a lean record of a generated id) its id's.
local function createdOf(id, createdAt)
  return tonumber(createdAt) or runIdTime(id)
end

-- Writes a new run record (enqueue, or a schedule's fire).
-- `due`: when the run is due (ms), or nil for at once.
-- `tag`/`tagValue`: one more field, where the run came from ('nonce' of its enqueue call, or
-- 'schedule' that fired it), not stored when '' (an enqueue of a generated id sends no nonce).
-- `lean` true stores the lean record, false the full one; nil: the namespace's layout decides
-- (its `schema` key, read once per call; 4 = lean). The lean record leaves out every field a
-- reader of this version derives (attempts, failures, stalls, priority 0; maxAttempts 3; the
-- token base; dueAt when due at once; createdAt when `idTimed`: the id was generated here and
-- carries the time). Older versions cannot read it: hence the layout (lib/migration).
-- `extra`: optional further field/value pairs, in the same HSET. `token`: the run is claimed by
-- this call (the enqueue fast path) with this first lease's token (see firstLeaseToken): the
-- lease (token, attempt, start) rides along too.
-- The clock is read only for a field that needs it: a lean record of a generated id, due at
-- once and not leased, needs none (a producer's common enqueue sends no TIME).
-- Whether a new record is lean: `lean` when given, else the namespace's layout (see storeRun).
local function leanRecord(base, lean)
  if lean ~= nil then return lean end
  if leanLayout == nil then leanLayout = (tonumber(redis.call('GET', base .. 'schema')) or 0) >= 4 end
  return leanLayout
end

local function storeRun(base, id, workflow, input, state, priority, maxAttempts, group, due, tag, tagValue, lean, idTimed, extra, token)
  lean = leanRecord(base, lean)
  local fields
  if lean then
    fields = { 'workflow', workflow, 'input', input, 'state', state }
    local n = 6
    if due then fields[n + 1], fields[n + 2], n = 'dueAt', due, n + 2 end
    -- A generated id carries its time (a producer's common enqueue decodes nothing).
    if not idTimed then fields[n + 1], fields[n + 2], n = 'createdAt', nowText(), n + 2 end
    if maxAttempts ~= DEFAULT_MAX_ATTEMPTS and tostring(maxAttempts) ~= DEFAULT_MAX_ATTEMPTS then fields[n + 1], fields[n + 2], n = 'maxAttempts', maxAttempts, n + 2 end
    if priority ~= '0' and tonumber(priority) ~= 0 then fields[n + 1], fields[n + 2] = 'priority', priority end
  else
    -- Text for the common case (stored at the call's time): no number formatting per run.
    local created = nowText()
    fields = { 'workflow', workflow, 'input', input, 'state', state, 'priority', priority, 'maxAttempts', maxAttempts,
      'attempts', '0', 'failures', '0', 'stalls', '0', 'token', created .. '000', 'createdAt', created, 'dueAt', due or created }
  end
  if tagValue ~= '' then fields[#fields + 1], fields[#fields + 2] = tag, tagValue end
  if group ~= '' then fields[#fields + 1], fields[#fields + 2] = 'group', group end
  if extra then
    for _, value in ipairs(extra) do fields[#fields + 1] = value end
  end
  if token then
    fields[#fields + 1], fields[#fields + 2] = 'token', token
    fields[#fields + 1], fields[#fields + 2] = 'attempts', '1'
    fields[#fields + 1], fields[#fields + 2] = 'startedAt', nowText()
  end
  redis.call('HSET', base .. 'run:' .. id, unpack(fields))
end

-- The token of a run's first lease taken by its enqueue (the fast path): its creation time as
-- storeRun records it (a lean record of a generated id, `idTimed`: the id's; else now) in µs, plus one.
local function firstLeaseToken(base, id, idTimed, lean)
  return intText(((idTimed and leanRecord(base, lean) and runIdTime(id)) or nowMs()) * 1000 + 1)
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
  -- One chunk, as most journals are (a run with no steps or a few): no table of arguments.
  local length = #journal - space
  if length > 0 and length <= JOURNAL_CHUNK then
    return redis.call('HSET', runKey, slot, '1', slot .. '.0', string.sub(journal, space + 1), ...)
  end
  local args = { ... }
  local countAt = #args + 2
  args[countAt - 1], args[countAt] = slot, 0
  local chunks = 0
  for i = space + 1, #journal, JOURNAL_CHUNK do
    args[#args + 1] = slot .. '.' .. chunks
    args[#args + 1] = string.sub(journal, i, i + JOURNAL_CHUNK - 1)
    chunks = chunks + 1
  end
  args[countAt] = chunks
  return redis.call('HSET', runKey, unpack(args))
end
