-- steps: saving step results, shared by save-steps and complete (`-- @include steps`). No needs,
-- so the lean save-steps script carries nothing else.

local NO_STEPS = {}

-- Saves the steps given in ARGV[from .. to], four values each: run id, lease token, step key,
-- encoded result — each only if the token still holds the run's lease. Returns a status per
-- step: 1 saved, 0 lease lost (nothing written); the list is only to be read.
local function saveSteps(base, from, to)
  -- None, as in most calls: a shared empty list (callers only read it), not a new table.
  if from > to then return NO_STEPS end
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
