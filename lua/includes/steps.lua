-- Saving step results, shared by save-steps and complete. Self-contained (no `common`), so the
-- lean save-steps script carries nothing else.

-- Saves the steps given in ARGV[from .. to], six values each: run id, lease token, step key,
-- encoded result, position field '@<n>', position value '<kind>:<key>' (the determinism guard's
-- record, lib/worker/determinism.guard.ts) — each only if the token still holds the run's lease.
-- Returns a status per step: 1 saved, 0 lease lost (nothing written).
local function saveSteps(base, from, to)
  local statuses = {}
  for i = from, to, 6 do
    local runKey = base .. 'run:' .. ARGV[i]
    local lease = redis.call('HMGET', runKey, 'state', 'token')
    if lease[1] == 'active' and lease[2] == ARGV[i + 1] then
      redis.call('HSET', runKey, 'step:' .. ARGV[i + 2], ARGV[i + 3], 'step:' .. ARGV[i + 4], ARGV[i + 5])
      statuses[#statuses + 1] = 1
    else
      statuses[#statuses + 1] = 0
    end
  end
  return statuses
end
