#!lua
--[[
  send-event: resume the runs waiting for an event name and key (QueueClient.sendEvent) with its
  payload, at most ARGV[4] of them per call: it visits only the runs in that name and key's index
  (see lua/includes/waits.lua), never the other waiting runs. The caller calls again while runs
  are left (the reply says how many).

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, waits, event-waits

  KEYS[1] limits  hash
  KEYS[2] seq     string
  KEYS[3], KEYS[4] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] target '<event name>|<key>'
  ARGV[3] encoded payload ('' = undefined)
  ARGV[4] most runs to resume in this call
  Reply: { runs resumed, runs still in the index }
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
-- @include waits
-- @include event-waits

local resumed, left = resumeEventWaits(ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]))
return { resumed, left }
