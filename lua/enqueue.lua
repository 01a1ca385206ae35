#!lua
--[[
  enqueue: store a new run and make it due in its lane (see laneOf) or park it in its workflow's
  delayed set; wake a worker. Idempotent on the run id: if the run exists, nothing is written and
  its state is returned. The work is enqueueRun (lua/includes/enqueue.lua), shared with
  enqueue-many.lua.

  Fast path: when it is enabled, the run is due now, nothing is queued ahead of it in its lane
  or wake list, every cap (namespace, workflow, group) has room, neither is paused, every rate
  limit has room (the start is recorded) and a worker is parked on the
  workflow (see park.lua), the run is claimed here and handed over through the wake list (see
  handoffEntry), so it starts without a reserve round trip. The data is exactly what a reserve
  claim writes: complete, fail, retry and stall recovery treat it alike. A handoff is taken by a
  blocked worker, or by any claim of the workflow (takeHandoff); if its worker dies, the stalled
  scan recovers it. A run with a trace context (ARGV[14]) is never fast-pathed: a handoff entry
  has no room for it that older workers, which read the same wake lists, would not misparse, so
  it goes through a claim, whose row carries it (see withExtras in claim.lua). Nor is a run with
  its own time limit (ARGV[15]), for the same reason: its claim row carries the limit.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, records, enqueue

  KEYS[1] run:<id>          hash
  KEYS[2] leases            zset
  KEYS[3] limits            hash
  KEYS[4] seq               string
  KEYS[5], KEYS[6] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  ARGV[3] workflow name
  ARGV[4] encoded input
  ARGV[5] priority, 0..1048575 (higher runs first)
  ARGV[6] delay in ms from now (>= 0)
  ARGV[7] due time in ms since the epoch, or '' (wins over the delay)
  ARGV[8] max attempts
  ARGV[9] group, or ''
  ARGV[10] 1 to allow the fast path, 0 not to
  ARGV[11] lease length in ms of a fast-pathed run, if the parked worker's announcement names none
  ARGV[12] who will wait on the run (run()), whose outcome is then to be published (stored as the
           field 'waited', see finishRun in finish.lua): '1' on the run's done channel, or the
           caller's inbox id (its process's inbox channel); '0' or '' for nobody
  ARGV[13] nonce of the enqueue call: a retry after a lost reply finds the run its own first
           attempt created and still answers 'created'; '' for a generated id (lib/workflow/run-id.ts),
           which carries its creation time: a lean record then stores no createdAt
  ARGV[14] optional: the enqueuing call's trace context (an OpenTelemetry propagation carrier as
           JSON), stored as the run field 'trace' for the workers' spans; absent or '' for none.
           Old processes neither send nor read it (a compatible layout change)
  ARGV[15] optional: the run's time limit per attempt in ms (EnqueueOptions.runTimeoutMs), stored
           as the run field 'timeoutMs' (only when set) and shipped with every claim of the run
           (see claimRun in claim.lua); absent or '' for none (the workflow's limit applies)
  ARGV[16] optional: 1 to store the lean run record (see storeRun in records.lua): the caller
           found the namespace at layout 4, or has QueueModuleOptions.compactRunRecords; absent
           or '' for the full one
  Reply: { created: 1 new run | 0 existing run, state } (state 'active' = fast-pathed)
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

local created, state = enqueueRun(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9],
  ARGV[10] == '1', ARGV[11], ARGV[12] ~= '0' and ARGV[12] or '', ARGV[13] or '', ARGV[14] or '', ARGV[15] or '', ARGV[16] == '1')
return { created, state }
