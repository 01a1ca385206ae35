#!lua flags=allow-oom
--[[
  list-runs: one page of a workflow's runs in one state, with their fields, read from the index
  that holds that state — never from a scan of the keyspace.

  - finished ('completed' | 'failed' | 'cancelled'): the finish index wf:<name>:<state> (see
    countFinished in finish.lua), in finish order; cursor = the score of the last entry examined,
    so a page boundary stays put while runs keep finishing. Entries whose run expired, was
    removed, or whose id now names a run in another state are skipped and dropped from the index.
  - 'delayed': wf:<name>:delayed in due order; cursor = '<due> <id>' of the last entry examined
    (due times tie, ids break the tie as the zset does). Runs in a durable wait (waits.lua) are
    in that set too when their wait has a deadline: they are left out (not counted as stale).
    The same kind pages a durable wait's index (wf:<name>:sleeping, :waiting-signal…), by
    deadline; there every run is in a wait, and an entry whose run is not (an older version
    promoted and ran it, leaving the entry) is dropped as stale. Either way the fields must
    include 'wait'.
  - 'waiting': the lane's priority zset, then its FIFO list: claim order. Cursor = how many
    positions were passed, so a page is a snapshot: runs claimed meanwhile shift what follows.
  - 'active': an SSCAN of the active set (wf:<name>:active, or a group's), unordered; cursor =
    the SSCAN cursor (a page may hold a few more or fewer runs than asked, and a run may show
    twice while the set is rehashed).
  On the zsets a call examines at most `limit` + EXAMINE entries (2,000): with a group filter
  (finished and delayed states; filtered here, from each run's hash) or many stale entries, a
  page may come back short, or empty, with a cursor to go on from.

  Includes: util

  KEYS[1] the index: wf:<name>:<state> | wf:<name>:delayed | a wait index | a lane's `waiting` zset | an active set
  KEYS[2] the lane's `queue` list for 'waiting' (else KEYS[1] again, unused)
  KEYS[3], KEYS[4] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] kind: 'finished' | 'delayed' | 'waiting' | 'active'
  ARGV[3] the state the listed runs must be in
  ARGV[4] cursor from the previous page, or '' to start
  ARGV[5] page size (1..1000)
  ARGV[6] 'asc' | 'desc' (ignored for 'active')
  ARGV[7] group whose runs to keep (finished and delayed), or ''
  ARGV[8] dedupe key whose runs to keep (field 'dedupeKey', every kind), or ''
  ARGV[9 ..] the run fields to reply, among them 'state', 'group' and 'dedupeKey'
  Reply: { next cursor ('' = no more), { id, field values… }, … }, or { false } for 'completed'
         of a workflow whose completed runs are not indexed (and never were)
]]
-- @include util

local EXAMINE = 2000

local base, kind, state, cursor = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local limit, asc, group, dedupeKey = tonumber(ARGV[5]), ARGV[6] ~= 'desc', ARGV[7], ARGV[8]
local fields, stateAt, groupAt, waitAt, dedupeAt = {}, 0, 0, 0, 0
for i = 9, #ARGV do
  fields[#fields + 1] = ARGV[i]
  if ARGV[i] == 'state' then stateAt = #fields end
  if ARGV[i] == 'group' then groupAt = #fields end
  if ARGV[i] == 'dedupeKey' then dedupeAt = #fields end
  if ARGV[i] == 'wait' then waitAt = #fields end
end
-- Which runs of a zset of not-yet-due runs belong on the page: those in a durable wait in a wait
-- index, the others in the delayed set.
local waitsOnly = kind == 'delayed' and string.sub(KEYS[1], -8) ~= ':delayed'
-- The workflow the index belongs to (KEYS[1] is wf:<name>:<suffix>): an id reused by another
-- workflow's run before this index entry was trimmed is not this workflow's.
local prefix = base .. 'wf:'
local indexWorkflow = string.sub(KEYS[1], #prefix + 1, #KEYS[1] - #(string.match(KEYS[1], ':[^:]+$') or ''))
local fieldsCount = #fields
fields[#fields + 1] = 'workflow'

-- Completed runs are indexed only where the workflow asks for it (indexCompleted, keep.completed).
if kind == 'finished' and state == 'completed' and redis.call('EXISTS', KEYS[1]) == 0
    and redis.call('HEXISTS', base .. 'limits', 'wf:' .. indexWorkflow .. ':index-completed') == 0 then
  return { false }
end

local rows = {}
-- Reads a run; appends it if it is in the state and group asked for. Returns false if the run is
-- not (or no longer) in that state.
local function visit(id)
  local values = redis.call('HMGET', base .. 'run:' .. id, unpack(fields))
  if values[stateAt] ~= state or (kind ~= 'waiting' and kind ~= 'active' and values[fieldsCount + 1] ~= indexWorkflow) then return false end
  if kind == 'delayed' and waitAt > 0 and (values[waitAt] and true or false) ~= waitsOnly then
    -- In the delayed set, a run in a wait is simply not this page's; in a wait index, a run no
    -- longer waiting is a stale entry (an older version promoted and ran it).
    return not waitsOnly
  end
  if (group == '' or values[groupAt] == group) and (dedupeKey == '' or values[dedupeAt] == dedupeKey) then
    local row = { id }
    for i = 1, fieldsCount do row[i + 1] = values[i] or false end
    rows[#rows + 1] = row
  end
  return true
end

if kind == 'active' then
  local page = redis.call('SSCAN', KEYS[1], cursor == '' and '0' or cursor, 'COUNT', limit)
  for _, id in ipairs(page[2]) do visit(id) end
  return { page[1] == '0' and '' or page[1], unpack(rows) }
end

if kind == 'waiting' then
  -- Positions in claim order: the priority zset (ZPOPMIN order), then the FIFO list.
  local inZset, inList = redis.call('ZCARD', KEYS[1]), redis.call('LLEN', KEYS[2])
  local total = inZset + inList
  local offset = cursor == '' and 0 or tonumber(cursor)
  local first, last = offset, math.min(offset + limit, total) - 1
  if not asc then first, last = total - 1 - last, total - 1 - offset end
  local ids = {}
  if first <= last then
    if first < inZset then
      for _, id in ipairs(redis.call('ZRANGE', KEYS[1], first, math.min(last, inZset - 1))) do ids[#ids + 1] = id end
    end
    if last >= inZset then
      for _, id in ipairs(redis.call('LRANGE', KEYS[2], math.max(first - inZset, 0), last - inZset)) do ids[#ids + 1] = id end
    end
  end
  local from, to, step = 1, #ids, 1
  if not asc then from, to, step = #ids, 1, -1 end
  for i = from, to, step do visit(ids[i]) end
  local passed = offset + math.max(0, last - first + 1)
  return { passed < total and tostring(passed) or '', unpack(rows) }
end

-- Zsets: finish indexes (unique scores) and the delayed set (scores tie, members break ties).
local key = KEYS[1]
-- Members of equal score sort by their bytes; Lua's `<` on strings follows the server's locale.
local function byteLess(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

local function scoreText(score) return string.format('%.0f', tonumber(score)) end

-- How many entries sort before the cursor (score, id), or also at it with `inclusive`. Entries
-- of equal score sort by member: a binary search among them, a few O(log n) reads at most.
local function countBefore(score, id, inclusive)
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score)
  local hi = redis.call('ZCOUNT', key, '-inf', score)
  if id == nil then return inclusive and hi or lo end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local member = redis.call('ZRANGE', key, mid, mid)[1]
    if byteLess(member, id) or (inclusive and member == id) then lo = mid + 1 else hi = mid end
  end
  return lo
end

-- The rank (in page order) of the first entry after the cursor.
local rank = 0
if cursor ~= '' then
  local space = string.find(cursor, ' ', 1, true)
  local score, id = cursor, nil
  if space then score, id = string.sub(cursor, 1, space - 1), string.sub(cursor, space + 1) end
  if asc then
    rank = countBefore(score, id, true)
  else
    rank = redis.call('ZCARD', key) - countBefore(score, id, false)
  end
end

local budget = limit + EXAMINE
local examined, stale, nextCursor = 0, {}, ''
while #rows < limit and examined < budget do
  local want = math.min(budget - examined, (group == '' and dedupeKey == '') and limit - #rows or 500)
  local batch = redis.call(asc and 'ZRANGE' or 'ZREVRANGE', key, rank, rank + want - 1, 'WITHSCORES')
  for i = 1, #batch, 2 do
    local id = batch[i]
    examined = examined + 1
    rank = rank + 1
    nextCursor = scoreText(batch[i + 1])
    if kind == 'delayed' then nextCursor = nextCursor .. ' ' .. id end
    if not visit(id) and (kind == 'finished' or waitsOnly) then stale[#stale + 1] = id end
    if #rows >= limit then break end
  end
  if #batch < 2 * want then break end
end
-- Past the last entry: no next page (also when the page filled up exactly there).
if rank >= redis.call('ZCARD', key) then nextCursor = '' end
-- Stale finish or wait-index entries (the run expired, was removed, its id was reused, or it left
-- its wait under an older version): dropped, once the ranks above served.
if #stale > 0 then callChunked('ZREM', key, stale, 500) end
return { nextCursor, unpack(rows) }
