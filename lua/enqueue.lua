#!lua
--[[
  enqueue: store a new run and make it due in its lane (see laneOf) or park it in its workflow's
  delayed set; wake a worker (a lone run queued behind others needs no wake, see enqueuePlain).
  Idempotent on the run id: if the run exists, nothing is written and its state is returned. The
  work is enqueueRun (lua/includes/enqueue.lua), shared with enqueue-many.lua, or enqueuePlain
  when no option differs from its default (the common call), or for a producer's run behind a
  backlog the straight line below the includes.

  Fast path: when it is enabled, the run is due now, nothing is queued ahead of it in its lane
  or wake list, every cap (namespace, workflow, group) has room, neither is paused, every rate
  limit has room (the start is recorded) and a worker is parked on the
  workflow (see park.lua), the run is claimed here and handed over, so it starts without a
  reserve round trip: published on the worker's handoff channel, whose blocking read stays under
  way (a worker that names none in its announcement, an older one, gets it through the wake list;
  a publish that reaches no one queues the run instead; a worker of the caller's own process gets
  it from this call's reply alone; see deliverHandoff). The data is exactly what a reserve
  claim writes: complete, fail, retry and stall recovery treat it alike. A handoff is taken by a
  blocked worker, or by any claim of the workflow (takeHandoff); if its worker dies, the stalled
  scan recovers it. A run with a trace context ('trace') is never fast-pathed: a handoff entry
  has no room for it that older workers, which read the same wake lists, would not misparse, so
  it goes through a claim, whose row carries it (see withExtras in claim.lua). Nor is a run with
  its own time limit ('timeout'), for the same reason: its claim row carries the limit.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, records, enqueue,
  enqueue-options

  KEYS[1] run:<id>          hash
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  Also, named from the key base: leases (zset), limits (hash), seq (string) and the workflow's
          keys, all in the same slot (each key passed costs Redis about 1,000 instructions)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] run id
  ARGV[3] workflow name
  ARGV[4] encoded input
  ARGV[5] three flags, each '1' or '0': allow the fast path; store the lean run record (see
          storeRun in records.lua: the caller found the namespace at layout 4, or has
          QueueModuleOptions.compactRunRecords); look for an existing run first ('0' only for a
          generated id's first try: no run can have it yet, and the look is a command); then,
          if the caller's process has a worker, that worker's id: a run handed to it is not
          published on its handoff channel, as the caller starts the run from this reply (see
          deliverHandoff). Part of this argument rather than one more: each costs Redis about
          1,000 instructions
  ARGV[6] lease length in ms of a fast-pathed run, if the parked worker's announcement names none
  ARGV[7] who will wait on the run (run()), whose outcome is then to be published (stored as the
          field 'waited', see finishRun in finish.lua): '1' on the run's done channel, or the
          caller's inbox id (its process's inbox channel); '' or left off for nobody
  ARGV[8] nonce of the enqueue call: a retry after a lost reply finds the run its own first
          attempt created and still answers 'created'; '' or left off for a generated id
          (lib/workflow/run-id.ts), which carries its creation time: a lean record then stores no
          createdAt. A call with no options (below) leaves off ARGV[8], and ARGV[7] too, when empty
  ARGV[9 ..] the options that differ from their defaults, as name/value pairs (each argument sent
          costs Redis about as much as a small command):
          'priority' 0..1048575, higher runs first (default 0);
          'delay' in ms from now (default 0);
          'at' due time in ms since the epoch (wins over the delay);
          'attempts' max attempts (default 3, DEFAULT_MAX_ATTEMPTS in records.lua);
          'group' the run's group;
          'trace' the enqueuing call's trace context (an OpenTelemetry propagation carrier as
            JSON), stored as the run field 'trace' for the workers' spans;
          'timeout' the run's time limit per attempt in ms (EnqueueOptions.runTimeoutMs), stored
            as the run field 'timeoutMs' and shipped with every claim of the run (see claimRun
            in claim.lua)
  Reply: the run's state ('active' = fast-pathed), after '+' if this call created the run (or is
         the retry of the call that did) and '=' if the id existed: a string, which Redis turns
         into a reply for a fraction of what a table costs it. A run handed over a worker's
         handoff channel is followed by ' <lease token> <worker id>': if that worker is the
         caller's own process's (named in ARGV[5]), the caller starts the run at once
         (lib/interfaces/local.worker.ts), and nothing was published
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
-- @include enqueue-options

-- A producer's common call with a backlog, first and in a straight line (nothing else set up):
-- a generated id's first try (no look for an existing run), a lean record, nobody waiting, no
-- option, and runs already queued in the lane. enqueuePlain's append behind them and lean record,
-- written out here: each Lua function call costs Redis about 400 instructions.
local laneEmpty = false
if #ARGV <= 6 then
  local lean, check = string.byte(ARGV[5], 2, 3)
  if lean == 49 and check == 48 then
    if redis.call('RPUSHX', ARGV[1] .. 'wf:' .. ARGV[3] .. ':queue', ARGV[2]) > 0 then
      redis.call('HSET', KEYS[1], 'workflow', ARGV[3], 'input', ARGV[4], 'state', 'waiting')
      return '+waiting'
    end
    laneEmpty = true
  end
end

-- See Reply above.
local function reply(created, state, token, listener)
  local text = (created == 1 and '+' or '=') .. state
  if listener then return text .. ' ' .. token .. ' ' .. listener end
  return text
end

local fastPath, lean, check = string.byte(ARGV[5], 1, 3)
if #ARGV[5] > 3 then handoffSelf = string.sub(ARGV[5], 4) end
if #ARGV <= 8 then
  -- No option differs from its default: the common call (see enqueuePlain).
  return reply(enqueuePlain(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[7] or '', ARGV[8] or '', fastPath == 49, ARGV[6], lean == 49, check == 49, laneEmpty))
end
local priority, delayMs, runAt, attempts, group, trace, timeoutMs = enqueueOptions(9, 'enqueue')
return reply(enqueueRun(ARGV[1], ARGV[2], ARGV[3], ARGV[4], priority, delayMs, runAt, attempts, group, fastPath == 49,
  ARGV[6], ARGV[7], ARGV[8], trace, timeoutMs, lean == 49, check == 49))
