-- leases: who holds a run, and the active counts at each level (`-- @include leases`). No needs.
--
-- Every script's base is ARGV[1] and its leases zset ends in 'leases': the one active index that
-- is a zset (activeCount and friends tell it from the sets by name).
--
-- Active counts (sizes of the leases zset and the active sets), each read once per call and then
-- kept current by this call's own writes through addActive/removeActive.

local KEYS_LEASES = ARGV[1] .. 'leases'

-- Set by every write to this include's per-call tables (see lib/redis/lua.library.ts).
local leasesDirty = false
local activeCache = {}
-- Deferred writes (see deferActiveWrites): per key, the ids to add (id -> score, or true for a
-- set) and to remove, and the change they make to a count not read yet.
local deferred = nil
local pendingAdds, pendingRemovals, pendingDelta = {}, {}, {}

local function activeCount(key)
  local count = activeCache[key]
  if count == nil then
    count = redis.call(key == KEYS_LEASES and 'ZCARD' or 'SCARD', key) + (pendingDelta[key] or 0)
    activeCache[key], leasesDirty = count, true
  end
  return count
end

local function countChange(key, by)
  if activeCache[key] then activeCache[key], leasesDirty = activeCache[key] + by, true else pendingDelta[key], leasesDirty = (pendingDelta[key] or 0) + by, true end
end

-- A hot call (complete) writes each active index once, at its end, with every id it added or
-- removed (flushActiveWrites), instead of a command per run. Counts read meanwhile include the
-- deferred writes; an id written is assumed absent before an add and present before a remove,
-- which the callers' checks guarantee (a claimed run is waiting; a released one holds its lease).
local function deferActiveWrites()
  deferred = true
end

local function addActive(key, id, score)
  if deferred then
    pendingAdds[key], leasesDirty = pendingAdds[key] or {}, true
    pendingAdds[key][id] = score or true
    return countChange(key, 1)
  end
  local added
  if score then added = redis.call('ZADD', key, score, id) else added = redis.call('SADD', key, id) end
  if added == 1 and activeCache[key] then activeCache[key], leasesDirty = activeCache[key] + 1, true end
end

local function removeActive(key, id)
  if deferred then
    if pendingAdds[key] and pendingAdds[key][id] then
      pendingAdds[key][id] = nil
    else
      pendingRemovals[key], leasesDirty = pendingRemovals[key] or {}, true
      pendingRemovals[key][#pendingRemovals[key] + 1] = id
    end
    return countChange(key, -1)
  end
  local removed = redis.call(key == KEYS_LEASES and 'ZREM' or 'SREM', key, id)
  if removed == 1 and activeCache[key] then activeCache[key], leasesDirty = activeCache[key] - 1, true end
end

-- Sends the deferred writes: per key its removals, then its additions, in chunks that stay
-- within Lua's argument limit.
local function flushActiveWrites()
  if not deferred then return end
  local CHUNK = 1000
  for key, ids in pairs(pendingRemovals) do
    for i = 1, #ids, CHUNK do
      redis.call(key == KEYS_LEASES and 'ZREM' or 'SREM', key, unpack(ids, i, math.min(i + CHUNK - 1, #ids)))
    end
  end
  for key, ids in pairs(pendingAdds) do
    local args = {}
    for id, score in pairs(ids) do
      if score ~= true then args[#args + 1] = score end
      args[#args + 1] = id
      if #args >= CHUNK then
        redis.call(key == KEYS_LEASES and 'ZADD' or 'SADD', key, unpack(args))
        args = {}
      end
    end
    if #args > 0 then redis.call(key == KEYS_LEASES and 'ZADD' or 'SADD', key, unpack(args)) end
  end
  pendingAdds, pendingRemovals, pendingDelta, deferred = {}, {}, {}, nil
end

-- Returns the run's workflow and group if `token` holds its lease, else nil. A stale worker
-- changes nothing.
-- Also returns who waits on the run (its 'waited' field, or false: see finishRun) and whether it
-- is linked.
local function leasedRun(runKey, token)
  local f = redis.call('HMGET', runKey, 'state', 'token', 'workflow', 'group', 'waited', 'links')
  if f[1] == 'active' and f[2] == token then return f[3], f[4] or '', f[5], f[6] == '1' end
  return nil
end
