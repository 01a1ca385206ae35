#!lua
--[[
  enqueue-many: enqueue a chunk of runs of one workflow in one call (QueueClient.enqueueMany),
  each exactly as lua/enqueue.lua would, in order: idempotent on each run id, fast-pathed when a
  worker is parked and nothing is queued ahead (so at most the first due run of a chunk per
  parked worker). One call instead of one per run spares Redis the per-call script setup and the
  client the per-call reply; the caller bounds a chunk (ENQUEUE_CHUNK) so one call never holds
  Redis for long.

  KEYS[1] leases  zset
  KEYS[2] limits  hash
  KEYS[3] seq     string
  KEYS[4], KEYS[5] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] workflow name
  ARGV[3] 1 to allow the fast path, 0 not to
  ARGV[4] lease length in ms of a fast-pathed run, if the parked worker's announcement names none
  ARGV[5] nonce of the call (as enqueue.lua's ARGV[13]; a retry after a lost reply sends it again)
  ARGV[6] the call's trace context or '' (as enqueue.lua's ARGV[14])
  ARGV[7] 1 to store compact run records (as enqueue.lua's ARGV[16]), 0 for full ones
  ARGV[8 ..] per run, eight values: run id, encoded input, priority, delay in ms, due time or '',
          max attempts, group or '', time limit in ms or '' (as enqueue.lua's ARGV[2], 4–9, 15)
  Reply: { per run: 1 created | 0 existing run (or listed earlier in this call) }
]]
-- @include common
-- @include enqueue

local base, workflow, fastPath, lockMs, nonce, trace, compact = ARGV[1], ARGV[2], ARGV[3] == '1', ARGV[4], ARGV[5], ARGV[6], ARGV[7] == '1'
local created, seen = {}, {}
for i = 8, #ARGV, 8 do
  -- An id twice in one call (two callers batched together, or one batch listing it twice): the
  -- later one finds the run the earlier one stored or found, as separate calls would.
  if seen[ARGV[i]] then
    created[#created + 1] = 0
  else
    seen[ARGV[i]] = true
    created[#created + 1] = enqueueRun(base, ARGV[i], workflow, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5],
      ARGV[i + 6], fastPath, lockMs, false, nonce, trace, ARGV[i + 7], compact)
  end
end
return created
