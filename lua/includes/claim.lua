-- Claiming due runs, shared by reserve (a worker's wake) and complete (the slot a finished run
-- frees is refilled in the same call). Needs `common`.

-- Claims up to maxClaims due runs round-robin over `workflows`, one per workflow per pass, each
-- under its workflow's fleet-wide cap from `limits`. Appends one entry per claim to `reply`:
-- { id, workflow, token, attempt, failures, encoded input, { step, value, … } }.
-- With passWake, if the batch filled up while a workflow still has claimable runs, passes its
-- wake marker on to the next idle worker.
local function claimRuns(base, leasesKey, limitsKey, workflows, maxClaims, now, lockMs, reply, passWake)
  local claimed = 0
  local open = {}
  for i = 1, #workflows do open[i] = true end

  local function room(wf)
    local limit = limitOf(limitsKey, wf)
    return not limit or redis.call('SCARD', base .. 'wf:' .. wf .. ':active') < limit
  end

  -- A run the enqueue fast path handed off is older than anything waiting: take it first. Its
  -- lease now runs on this worker's clock.
  local function takeHandoff(wf)
    local wakeKey = base .. 'wf:' .. wf .. ':wake'
    local entry = redis.call('LINDEX', wakeKey, 0)
    if not entry or entry == '1' then return end
    redis.call('LPOP', wakeKey)
    local s1 = string.find(entry, ' ', 1, true)
    local s2 = string.find(entry, ' ', s1 + 1, true)
    local token, id = string.sub(entry, 1, s1 - 1), string.sub(entry, s1 + 1, s2 - 1)
    if leasedWorkflow(base .. 'run:' .. id, token) then
      redis.call('ZADD', leasesKey, now + lockMs, id)
      reply[#reply + 1] = { id, wf, token, 1, 0, string.sub(entry, s2 + 1), {} }
      claimed = claimed + 1
    end
  end
  for _, wf in ipairs(workflows) do
    if claimed < maxClaims then takeHandoff(wf) end
  end

  local progress = true
  while progress and claimed < maxClaims do
    progress = false
    for i, wf in ipairs(workflows) do
      if open[i] and claimed < maxClaims then
        local popped = room(wf) and redis.call('ZPOPMIN', base .. 'wf:' .. wf .. ':waiting') or {}
        if #popped == 0 then
          open[i] = false
        else
          progress = true
          local id = popped[1]
          local runKey = base .. 'run:' .. id
          local f = redis.call('HMGET', runKey, 'token', 'attempts', 'failures', 'input')
          if f[1] then
            local token = tostring(tonumber(f[1]) + 1)
            local attempt = tonumber(f[2]) + 1
            redis.call('HSET', runKey, 'state', 'active', 'token', token, 'attempts', attempt, 'startedAt', now)
            redis.call('SADD', base .. 'wf:' .. wf .. ':active', id)
            redis.call('ZADD', leasesKey, now + lockMs, id)
            -- A first attempt has written no steps yet: skip reading the memo.
            local steps = {}
            if attempt > 1 then steps = redis.call('HGETALL', base .. 'steps:' .. id) end
            reply[#reply + 1] = { id, wf, token, attempt, tonumber(f[3]), f[4], steps }
            claimed = claimed + 1
          end
        end
      end
    end
  end

  if passWake and claimed >= maxClaims and maxClaims > 0 then
    for i, wf in ipairs(workflows) do
      if open[i] and redis.call('ZCARD', base .. 'wf:' .. wf .. ':waiting') > 0 and room(wf) then
        wake(base .. 'wf:' .. wf .. ':wake')
      end
    end
  end
  return claimed
end
