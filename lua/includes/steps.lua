-- steps: saving step results, shared by save-steps and complete (`-- @include steps`). No needs,
-- so the lean save-steps script carries nothing else.

-- Saves the steps given in ARGV[from .. to], four values each: run id, lease token, step key,
-- encoded result — each only if the token still holds the run's lease. Returns a status per
-- step: 1 saved, 0 lease lost (nothing written).
local function saveSteps(base, from, to)
  local statuses = {}
  for i = from, to, 4 do
    local runKey = base .. 'run:' .. ARGV[i]
    local lease = redis.call('HMGET', runKey, 'state', 'token')
    if lease[1] == 'active' and lease[2] == ARGV[i + 1] then
      redis.call('HSET', runKey, 'step:' .. ARGV[i + 2], ARGV[i + 3])
      statuses[#statuses + 1] = 1
    else
      statuses[#statuses + 1] = 0
    end
  end
  return statuses
end
