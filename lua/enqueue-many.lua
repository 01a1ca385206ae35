#!lua
--[[
  enqueue-many: enqueue a chunk of runs of one workflow in one call (QueueClient.enqueueMany),
  each exactly as lua/enqueue.lua would, in order: idempotent on each run id, fast-pathed when a
  worker is parked and nothing is queued ahead (so at most the first due run of a chunk per
  parked worker). One call instead of one per run spares Redis the per-call script setup and the
  client the per-call reply; the caller bounds a chunk (ENQUEUE_CHUNK) so one call never holds
  Redis for long.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, records, enqueue

  KEYS[1] leases  zset
  KEYS[2] limits  hash
  KEYS[3] seq     string
  KEYS[4], KEYS[5] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] workflow name
  ARGV[3] three flags, each '1' or '0' (as enqueue.lua's ARGV[7]): allow the fast path; store
          lean run records; look for an existing run first ('0' only for the first try of a
          call whose every id was generated)
  ARGV[4] lease length in ms of a fast-pathed run, if the parked worker's announcement names none
  ARGV[5] nonce of the call (as enqueue.lua's ARGV[6]; a retry after a lost reply sends it again);
          '' when every id of the call was generated (each carries its creation time)
  ARGV[6] the call's trace context or '' (as enqueue.lua's 'trace')
  ARGV[7] S, the values given per run: 8 (each run its own options) or 2 (the chunk's runs share
          their options, given once: the common batch, which then sends a quarter of the values)
  with S = 8: ARGV[8 ..] per run, eight values: run id, encoded input, priority, delay in ms, due
          time or '', max attempts, group or '', time limit in ms or '' (as enqueue.lua's options)
  with S = 2: ARGV[8 .. 13] the six options, in that order, of every run; ARGV[14 ..] per run,
          two values: run id, encoded input
  Reply: { per run: 1 created | 0 existing run (or listed earlier in this call) }
]]
-- @include time
-- @include util
-- @include lanes
-- @include wakes
-- @include limits
-- @include leases
-- @include rates
-- @include caps
-- @include groups
-- @include records
-- @include enqueue

local base, workflow, lockMs, nonce, trace = ARGV[1], ARGV[2], ARGV[4], ARGV[5], ARGV[6]
local fastPath, compact, check = string.byte(ARGV[3], 1, 3)
fastPath, compact, check = fastPath == 49, compact == 49, check == 49
local stride, first = tonumber(ARGV[7]), 8
local shared = stride == 2
local priority, delayMs, runAt, attempts, group, timeoutMs
if shared then
  priority, delayMs, runAt, attempts, group, timeoutMs = ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13]
  first = 14
end
local created, seen = {}, {}
-- One RPUSH per lane for the whole batch (see flushDuePushes).
deferDuePushes()
for i = first, #ARGV, stride do
  local id = ARGV[i]
  -- An id twice in one call (two callers batched together, or one batch listing it twice): the
  -- later one finds the run the earlier one stored or found, as separate calls would.
  if seen[id] then
    created[#created + 1] = 0
  else
    seen[id] = true
    if not shared then
      priority, delayMs, runAt, attempts, group, timeoutMs = ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7]
    end
    created[#created + 1] = enqueueRun(base, id, workflow, ARGV[i + 1], priority, delayMs, runAt, attempts, group, fastPath,
      lockMs, '', nonce, trace, timeoutMs, compact, check)
  end
end
flushDuePushes()
return created
