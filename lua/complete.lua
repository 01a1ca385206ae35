--[[
  complete: finish a run successfully, if the caller still holds its lease. Stores the result
  with its retention, releases the run's slot and publishes the result on the run's done channel.
  Then refills the worker's freed slot in the same call: claims up to ARGV[6] due runs, exactly
  as reserve does, so a busy worker needs one round trip per run.

  KEYS[1] run:<id>    hash
  KEYS[2] steps:<id>  hash
  KEYS[3] leases      zset
  KEYS[4] limits      hash
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  ARGV[3] lease token
  ARGV[4] encoded result ('' = undefined)
  ARGV[5] retention in ms
  ARGV[6] runs to claim for the caller (0 = none)
  ARGV[7] lease length in ms for claimed runs
  ARGV[8..] workflow names the caller runs (rotated by the caller)
  Reply: { 1 completed | 0 lease lost (nothing written, nothing claimed), claims… } with claims
         as in reserve
]]
-- @include common
-- @include claim

local workflow = leasedWorkflow(KEYS[1], ARGV[3])
if not workflow then return { 0 } end
local now = nowMs()
releaseSlot(ARGV[1], KEYS[3], KEYS[4], ARGV[2], workflow, false)
finishRun(ARGV[1], KEYS[1], KEYS[2], ARGV[2], workflow, 'completed', 'result', ARGV[4], now, tonumber(ARGV[5]))

local reply = { 1 }
local wanted = tonumber(ARGV[6])
if wanted > 0 then
  local workflows = {}
  for i = 8, #ARGV do workflows[#workflows + 1] = ARGV[i] end
  -- No wake to pass on: this worker comes back for more with its next completion.
  claimRuns(ARGV[1], KEYS[3], KEYS[4], workflows, wanted, now, tonumber(ARGV[7]), reply, false)
end
-- Only now, after the refill took what it could, is leftover room worth waking a worker for.
wakeIfRoom(ARGV[1], KEYS[4], workflow)
return reply
