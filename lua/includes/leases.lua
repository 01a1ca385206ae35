-- leases: who holds a run, and the active counts at each level (`-- @include leases`). No needs.
--
-- Every script's base is ARGV[1] and its leases zset ends in 'leases': the one active index that
-- is a zset (activeCount and friends tell it from the sets by name).
--
-- Active counts (sizes of the leases zset and the active sets), each read once per call and then
-- kept current by this call's own writes through addActive/removeActive.

local KEYS_LEASES = ARGV[1] .. 'leases'

local activeCache = {}
local function activeCount(key)
  local count = activeCache[key]
  if count == nil then
    count = redis.call(key == KEYS_LEASES and 'ZCARD' or 'SCARD', key)
    activeCache[key] = count
  end
  return count
end

local function addActive(key, id, score)
  local added
  if score then added = redis.call('ZADD', key, score, id) else added = redis.call('SADD', key, id) end
  if added == 1 and activeCache[key] then activeCache[key] = activeCache[key] + 1 end
end

local function removeActive(key, id)
  local removed = redis.call(key == KEYS_LEASES and 'ZREM' or 'SREM', key, id)
  if removed == 1 and activeCache[key] then activeCache[key] = activeCache[key] - 1 end
end

-- Returns the run's workflow and group if `token` holds its lease, else nil. A stale worker
-- changes nothing.
-- Also returns whether someone waits on the run and whether it is linked (see finishRun).
local function leasedRun(runKey, token)
  local f = redis.call('HMGET', runKey, 'state', 'token', 'workflow', 'group', 'waited', 'links')
  if f[1] == 'active' and f[2] == token then return f[3], f[4] or '', f[5] == '1', f[6] == '1' end
  return nil
end
