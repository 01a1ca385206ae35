-- limits: caps and controls, read from the limits hash (`-- @include limits`). No needs.
--
-- Caps, read from the limits hash (never from the caller), each once per script call: they
-- cannot change during one. false = no cap.
--
-- Pauses and rate limits ("controls") are fields of the limits hash too (see writeControl):
--   wf:<name>:paused, wf:<name>:g:<group>:paused (counted in wf:<name>:paused-groups);
--   wf:<name>:rate + :rate-ms (max starts per window of ms), wf:<name>:group-rate + :group-rate-ms
--   (every group's default), wf:<name>:g:<group>:rate + :rate-ms (an override, counted in
--   wf:<name>:rate-overrides).
-- The field 'controls' counts every pause and rate limit set in the namespace: while it is absent
-- (the common case), a claiming call pays that one read for all of this.

-- Set by every write to this include's per-call tables (see lib/redis/lua.library.ts).
local limitsDirty = false
local limitCache = {}
-- True once a call found the limits hash missing (a namespace with no caps, controls or kept
-- settings): every field reads as absent without a command. A script that writes the hash calls
-- forgetLimits (or sets the field in limitCache, which is looked at first).
local limitsAbsent = nil

local function cacheLimit(field, raw)
  if raw then raw = tonumber(raw) end
  limitCache[field], limitsDirty = raw, true
  return raw
end

local function limitOf(limitsKey, field)
  local limit = limitCache[field]
  if limit == nil then
    if limitsAbsent then return false end
    limit = cacheLimit(field, redis.call('HGET', limitsKey, field))
  end
  return limit
end

-- After a write to the limits hash: the next reads go to Redis.
local function forgetLimits()
  limitCache = {}
  limitsAbsent = nil
end

-- The fields a claim pass over these workflows reads in the common case (see primeLimits), with
-- `finishing` those countFinished reads too, and with `reserving` the flag of a rate review
-- under way (see startRateReview).
local function claimFields(workflows, finishing, reserving)
  if type(workflows) == 'string' then workflows = { workflows } end
  local fields = { 'ns', 'controls' }
  if finishing then fields[#fields + 1] = 'completed-watch' end
  for _, wf in ipairs(workflows) do
    fields[#fields + 1] = 'wf:' .. wf
    fields[#fields + 1] = 'wf:' .. wf .. ':overrides'
    fields[#fields + 1] = 'wf:' .. wf .. ':group'
    if reserving then fields[#fields + 1] = 'wf:' .. wf .. ':rate-review' end
    if finishing then
      fields[#fields + 1] = 'wf:' .. wf .. ':keep:completed'
      fields[#fields + 1] = 'wf:' .. wf .. ':index-completed'
      fields[#fields + 1] = 'wf:' .. wf .. ':ttl-max'
    end
  end
  return fields
end

-- Reads the fields a claim pass over `workflows` (a list, or one name) needs (see claimFields) in
-- one HMGET into the per-call cache: one command instead of one each. A namespace without a
-- limits hash (nothing capped, controlled or kept) pays one EXISTS and builds no field names.
-- Returns true (usable inside a condition).
local function primeLimits(limitsKey, workflows, finishing, reserving)
  if limitsAbsent == nil then limitsAbsent = redis.call('EXISTS', limitsKey) == 0 end
  if limitsAbsent then return true end
  local fields = claimFields(workflows, finishing, reserving)
  local values = redis.call('HMGET', limitsKey, unpack(fields))
  for i, field in ipairs(fields) do cacheLimit(field, values[i]) end
  return true
end

-- Whether none of the keys `a`, `b`, `c` exists, learning in the same EXISTS whether the limits
-- hash does (see primeLimits) if no command of this call has yet: the hash is named once more
-- than there are keys, so its count and theirs read apart.
local function noneExist(limitsKey, a, b, c)
  if limitsAbsent ~= nil then return redis.call('EXISTS', a, b, c) == 0 end
  local count = redis.call('EXISTS', limitsKey, limitsKey, limitsKey, limitsKey, a, b, c)
  limitsAbsent = count < 4
  return count % 4 == 0
end

-- A group's cap: its own override, else the workflow's default for every group. The field
-- 'wf:<name>:overrides' counts a workflow's overrides (see set-limits), so the common case — no
-- overrides — costs one read per workflow, not one per group.
local function groupLimit(limitsKey, workflow, group)
  if limitOf(limitsKey, 'wf:' .. workflow .. ':overrides') then
    local override = limitOf(limitsKey, 'wf:' .. workflow .. ':g:' .. group)
    if override then return override end
  end
  return limitOf(limitsKey, 'wf:' .. workflow .. ':group')
end

local function controlsOn(limitsKey)
  return limitOf(limitsKey, 'controls')
end

-- Sets (value ~= '') or removes a control field, keeping the counters named in `counters` (fields
-- of the limits hash) in step with whether the field is present. Returns the previous value.
local function writeControl(limitsKey, field, value, counters)
  local previous = redis.call('HGET', limitsKey, field) or ''
  if value == '' then redis.call('HDEL', limitsKey, field) else redis.call('HSET', limitsKey, field, value) end
  if (previous == '') ~= (value == '') then
    for _, counter in ipairs(counters) do
      if redis.call('HINCRBY', limitsKey, counter, value == '' and -1 or 1) <= 0 then redis.call('HDEL', limitsKey, counter) end
    end
  end
  forgetLimits()
  return previous
end
