-- event-waits: resuming the runs waiting in ctx.waitForEvent (`-- @include event-waits`).
-- @needs waits
--
-- An include of its own, for send-event.lua and publish.lua only: in waits.lua it would add a
-- local to every script that includes waits, reserve.lua among them, which is at Lua's limit of
-- 200 locals in a main chunk.

-- Resumes at most `max` of the runs waiting in ctx.waitForEvent for `target` ('<name>|<key>')
-- with the encoded payload (send-event.lua, publish.lua). Visits only that target's index; an
-- entry whose run waits for something else by now is dropped. Returns the runs resumed and those
-- still in the index.
local function resumeEventWaits(base, target, payload, max)
  local index = eventIndex(base, target)
  local envelope = payloadEnvelope(payload)
  local resumed = 0
  for _, id in ipairs(redis.call('SPOP', index, max)) do
    local runKey = base .. 'run:' .. id
    local f = waitingRun(runKey, 'event')
    if f then
      local _, _, memoKey, waitTarget = parseWait(f[2])
      if waitTarget == target then
        resumeWith(base, runKey, id, f, memoKey, envelope)
        resumed = resumed + 1
      end
    end
  end
  return resumed, redis.call('SCARD', index)
end
