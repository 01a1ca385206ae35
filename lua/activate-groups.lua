#!lua
--[[
  activate-groups: after every group's default cap of a workflow was raised or removed (by
  set-limits or a bootstrap's declare-limits), visits one batch of the workflow's groups: each
  that has due runs and room now rejoins the round-robin, and the workers are woken. The caller
  repeats with the cursor replied until it is '0', so no call visits every group of a workflow
  that has many. Visiting a group twice is harmless: a call may be repeated.

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups

  KEYS[1] limits  hash
  KEYS[2] seq     string
  KEYS[3], KEYS[4] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] workflow name
  ARGV[3] SSCAN cursor of the workflow's `groups` set: '0' to start, then the one replied
  Reply: the cursor to go on from, '0' when every group was visited
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

local cursor, joined = activateGroupBatch(ARGV[1], KEYS[1], KEYS[2], ARGV[2], ARGV[3])
if joined then wake(wfKey(ARGV[1], ARGV[2], 'wake')) end
return cursor
