-- finish: a run's end (its final state, and who hears of it), then the finish indexes and their
-- retention (`-- @include finish`).
-- @needs time, util, limits, records, waits
--
-- Finish indexes: per workflow, one zset per final state (wf:<name>:completed, :failed,
-- :cancelled), member = run id, score = finish order: max(the index's last score + 1, now * 1024).
-- Strict even for runs finishing in the same millisecond, and about the finish time, so
-- retention trims by score. listRuns pages by score.

-- The inbox of the process whose worker made this call (complete.lua's ARGV[8]), or '': that
-- worker tells its own process's waits of the runs it finished, from the call's reply, so an
-- announcement there would only cost Redis a publish and the process a read.
local callerInbox = ''

-- Tells one waiter of a run's end (see finishRun): '1' is the run's done channel, anything else a
-- process's inbox (not the caller's own: see callerInbox).
local function announceFinish(base, id, target, message)
  if target == '1' then
    publish(base .. 'done:' .. id, message)
  elseif target ~= callerInbox then
    publish(base .. 'inbox:' .. target, id .. ' ' .. message)
  end
end

-- Records a final state and starts the retention clock. If someone waits on the run (`waited`,
-- the run's 'waited' field: set by run() at enqueue, or by wait() through watch.lua), announces
-- it; the announcement carries the outcome itself (`field` is 'result' or 'error', `payload`
-- already JSON) so the waiter needs no further read. `waited` lists where, space-separated: '1'
-- is the run's done channel (wait(); run() of older versions), anything else the inbox of the
-- process whose run() enqueued it, one channel per process (see RunWaiter), announced there as
-- '<id> <message>'. The stored record stays the truth; a run nobody waits on costs no publish.
-- A `linked` run (field 'links': it is a child workflow, or signals wait in its mailbox; see
-- waits.lua) also resumes its parent and drops its mailbox: the common run pays nothing for
-- either. `journal`: the attempt's, stored with the outcome.
local function finishRun(base, runKey, id, workflow, state, field, payload, now, ttlMs, waited, linked, journal)
  hsetRun(runKey, journal, 'state', state, field, payload, 'finishedAt', intText(now))
  redis.call('PEXPIRE', runKey, steadyText(ttlMs))
  if linked then
    redis.call('DEL', base .. 'mailbox:' .. id)
    local parent = redis.call('HGET', runKey, 'parent')
    if parent then
      if not onChildFinished then error('finishRun: a script that finishes runs must include waits') end
      onChildFinished(base, parent, state, payload)
    end
  end
  -- The caller's own inbox alone, the usual waiter of a run() in one app, hears it from the reply.
  if not waited or waited == '' or waited == callerInbox then return end
  local body = payload
  if body == '' then body = 'null' end
  local message = '{"v":1,"state":"' .. state .. '","workflow":"' .. workflow .. '","' .. field .. '":' .. body
    .. ',"undef":' .. (payload == '' and 'true' or 'false') .. '}'
  -- Most runs have one waiter: no iterator for it.
  if string.find(waited, ' ', 1, true) then
    for target in string.gmatch(waited, '%S+') do announceFinish(base, id, target, message) end
  elseif waited ~= '' then
    announceFinish(base, id, waited, message)
  end
end

local FINISH_SCALE = 1024
-- How many finishes of a state pass between two looks for expired index entries.
local TRIM_EVERY = 64

-- Adds one finished run to a per-call tally (workflow -> ids in finish order), written once per
-- workflow by countFinished. Every run a call tallies ends in the same state.
local function tallyFinished(tally, workflow, id)
  local ids = tally[workflow]
  if not ids then
    tally[workflow] = { id }
  else
    ids[#ids + 1] = id
  end
end

-- Index entries older than the retention point at run hashes that expired: dropped, at most
-- `budget` a call (an index never holds more than a few calls' worth of them). A run finished
-- at t has score >= t * 1024, so a score below (now - ttl) * 1024 proves its hash is gone.
local function trimExpired(indexKey, now, ttlMs, budget)
  local cutoff = string.format('%.0f', (now - ttlMs) * FINISH_SCALE)
  local old = redis.call('ZRANGEBYSCORE', indexKey, '-inf', '(' .. cutoff, 'LIMIT', 0, budget)
  if #old > 0 then callChunked('ZREM', indexKey, old, 500) end
end

-- Retention by count: the oldest runs past the newest `keep` are deleted with their entries,
-- at most `budget` a call. An entry whose run is not in that state any more (its hash expired
-- and the id was enqueued again) loses only its entry: the new run is not this index's.
local function trimToKeep(base, workflow, indexKey, state, keep, budget)
  local excess = redis.call('ZCARD', indexKey) - keep
  if excess <= 0 then return end
  local n = math.min(excess, budget)
  local doomed = {}
  for _, id in ipairs(redis.call('ZRANGE', indexKey, 0, n - 1)) do
    local runKey = base .. 'run:' .. id
    local f = redis.call('HMGET', runKey, 'state', 'workflow')
    if f[1] == state and f[2] == workflow then doomed[#doomed + 1] = runKey end
  end
  redis.call('ZREMRANGEBYRANK', indexKey, 0, n - 1)
  for i = 1, #doomed, 500 do redis.call('DEL', unpack(doomed, i, math.min(i + 499, #doomed))) end
end

-- The longest retention of any process that indexed `workflow`'s finished runs, `ttlMs` (this
-- call's) included: written to the limits hash when this call's is longer.
local function indexRetention(limitsKey, workflow, ttlMs)
  local ttlField = 'wf:' .. workflow .. ':ttl-max'
  local ttlMax = limitOf(limitsKey, ttlField) or 0
  if ttlMs > ttlMax then
    ttlMax = ttlMs
    redis.call('HSET', limitsKey, ttlField, intText(ttlMax))
    limitCache[ttlField], limitsDirty = ttlMax, true
  end
  return ttlMax
end

-- Writes a call's tally of runs that ended in `state`: per workflow, the running total, one
-- sequence read and write, the index entries (one ZADD), then the bounded trims (retention by
-- time, then by count: `wf:<name>:keep:<state>` in the limits hash, completed and failed only).
-- Call it after the call's last write to a finished run's hash: a count of 0 deletes the hash here.
local function countFinished(base, limitsKey, tally, state, now, ttlMs)
  for workflow, ids in pairs(tally) do
    local added = #ids
    local total = redis.call('HINCRBY', wfKey(base, workflow, 'stats'), state, intText(added))
    local indexKey = wfKey(base, workflow, state)
    -- Completed runs are indexed only where asked for (@Workflow indexCompleted, or keep.completed),
    -- or while a dashboard is open ('completed-watch': until when, in ms, renewed by the page's
    -- reads): the one finish every run has, so the index costs the hot path only when used.
    if state ~= 'completed' or limitOf(limitsKey, 'wf:' .. workflow .. ':index-completed')
        or (limitOf(limitsKey, 'completed-watch') or 0) > now then
      -- Trim by the longest retention any process indexing this workflow's runs uses: an entry
      -- is dropped only once no record it can point at is left. Kept in the limits hash, so a
      -- claiming call reads it with its other limits (see primeLimits), written only when it
      -- grows, and only here: runs that are not indexed need none.
      local ttlMax = indexRetention(limitsKey, workflow, ttlMs)
      -- Strict finish order: after the index's last entry, and about the finish time.
      local last = redis.call('ZRANGE', indexKey, -1, -1, 'WITHSCORES')
      local score = math.max(#last > 0 and tonumber(last[2]) + 1 or 0, now * FINISH_SCALE)
      local members = {}
      for k, id in ipairs(ids) do
        members[2 * k - 1] = string.format('%.0f', score + k - 1)
        members[2 * k] = id
      end
      callChunked('ZADD', indexKey, members, 1000)
      local budget = 2 * added + 64
      -- Expired entries: looked for once per TRIM_EVERY finishes of the state (the running total
      -- crossing a multiple), with room for all that can have expired since.
      if math.floor(total / TRIM_EVERY) ~= math.floor((total - added) / TRIM_EVERY) then
        trimExpired(indexKey, now, ttlMax, 4 * TRIM_EVERY + budget)
      end
      if state ~= 'cancelled' then
        local keep = limitOf(limitsKey, 'wf:' .. workflow .. ':keep:' .. state)
        if keep then trimToKeep(base, workflow, indexKey, state, keep, budget) end
      end
    end
  end
end
