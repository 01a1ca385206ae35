#!lua flags=allow-oom
--[[
  stats: a consistent snapshot of counts and caps. Queues and sets are counted; due grouped runs
  and finished runs are running totals, so the cost does not grow with the number of runs or
  groups, but for the rows of groups (at most GROUP_ROWS a workflow) and a one-time count after
  an upgrade (see groupDue).

  Includes: time, util, lanes, wakes, limits, leases, rates, caps, groups, waits

  KEYS[1] leases  zset
  KEYS[2] limits  hash
  KEYS[3], KEYS[4] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] 1 to include rows of groups with due or active runs (at most GROUP_ROWS a workflow), 0 not to
  ARGV[3..] workflow names, or none for every registered workflow
  Reply: { namespace active, namespace cap or '', per workflow: { name, waiting, delayed, active,
           cap or '', group default cap or '', completed, failed, { per group: group, waiting,
           active, cap or '', 1 paused | 0, rate max or '', rate window ms or '' (the group's
           override, else the default), ms its rate limit holds its due runs back until or '' … }, groups with due or active runs left out of those rows,
           1 paused | 0, rate max or '', rate window ms or '', group default rate max or '', its
           window or '', cancelled, sleeping, waiting-signal, waiting-event, waiting-child } … }
           where delayed leaves out the runs in a durable wait (waits.lua), counted on their own
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

-- Rows of groups a call returns per workflow: each costs a few reads, and a workflow may have
-- any number of groups. Past it, the rows are the first GROUP_ROWS groups in the `groups` set's
-- own order (SSCAN from the start): an arbitrary selection, not the busiest, that stays the
-- same while the set does.
local GROUP_ROWS = 1000

local base = ARGV[1]
local workflows = {}
for i = 3, #ARGV do workflows[#workflows + 1] = ARGV[i] end
if #workflows == 0 then workflows = redis.call('SMEMBERS', base .. 'workflows') end
table.sort(workflows)

-- Due grouped runs: the 'groupDue' count kept by makeDue and the claim pass, exact once
-- 'groupDueExact' marks it. Data written by a version without the count has no mark (and this
-- version may have counted its runs partly): the first stats call on it counts every group's
-- lanes once and stores the sum, a one-time pass over the groups.
-- declare-limits marks a workflow that has no group yet, so a new namespace never pays it. A
-- negative count can only come from a process that does not keep it (an older version still
-- running beside this one): it is counted again.
local function groupDue(wf, counted, exact)
  counted = tonumber(counted or 0)
  if exact and counted >= 0 then return counted end
  return recountGroupDue(base, wf)
end

-- The groups to give rows for, and how many groups were left out.
local function rowGroups(wf)
  local groupsKey = wfKey(base, wf, 'groups')
  local total = redis.call('SCARD', groupsKey)
  if total <= GROUP_ROWS then return redis.call('SMEMBERS', groupsKey), 0 end
  local groups, seen, cursor = {}, {}, '0'
  repeat
    local page = redis.call('SSCAN', groupsKey, cursor, 'COUNT', GROUP_ROWS)
    cursor = page[1]
    -- SSCAN may return a group twice (while the set is rehashed): keep the first.
    for _, g in ipairs(page[2]) do
      if #groups < GROUP_ROWS and not seen[g] then
        seen[g] = true
        groups[#groups + 1] = g
      end
    end
  until cursor == '0' or #groups >= GROUP_ROWS
  return groups, total - #groups
end

-- Runs in each kind of durable wait, and how many of them have a deadline (those are in the
-- delayed set too).
local WAIT_KINDS = { 'sleep', 'signal', 'event', 'child' }
local function waitCounts(wf)
  local counts, timed = {}, 0
  for i, kind in ipairs(WAIT_KINDS) do
    local key = wfKey(base, wf, WAIT_INDEX[kind])
    counts[i] = redis.call('ZCARD', key)
    if counts[i] > 0 then timed = timed + redis.call('ZCOUNT', key, '-inf', '(' .. string.format('%.0f', NEVER)) end
  end
  return counts, timed
end

local reply = { redis.call('ZCARD', KEYS[1]), limitOf(KEYS[2], 'ns') or '' }
for _, wf in ipairs(workflows) do
  local statsKey = wfKey(base, wf, 'stats')
  local f = redis.call('HMGET', statsKey, 'completed', 'failed', 'groupDue', 'groupDueExact', 'cancelled')
  local waiting = dueCount(laneOf(base, wf, '')) + groupDue(wf, f[3], f[4])
  local perGroup, omitted = {}, 0
  if ARGV[2] == '1' then
    local groups
    groups, omitted = rowGroups(wf)
    local heldKey = wfKey(base, wf, 'rate-held')
    for _, g in ipairs(groups) do
      local lane = laneOf(base, wf, g)
      local paused = limitOf(KEYS[2], 'wf:' .. wf .. ':g:' .. g .. ':paused') and 1 or 0
      local rateMax, rateMs = groupRate(KEYS[2], wf, g)
      -- Only a rate-limited group can be held (no read for the others). An entry left in rate-held
      -- past its time holds nothing: reserve has yet to take it off.
      local heldUntil = rateMax and redis.call('ZSCORE', heldKey, g)
      if not heldUntil or tonumber(heldUntil) <= nowMs() then heldUntil = '' end
      perGroup[#perGroup + 1] = { g, dueCount(lane), redis.call('SCARD', lane .. 'active'), groupLimit(KEYS[2], wf, g) or '', paused,
        rateMax or '', rateMs or '', heldUntil }
    end
  end
  local waits, timed = waitCounts(wf)
  -- Never below 0: a wait an older version promoted and ran stays in its index (see list-runs).
  local delayed = math.max(0, redis.call('ZCARD', wfKey(base, wf, 'delayed')) - timed)
  reply[#reply + 1] = { wf, waiting, delayed, redis.call('SCARD', wfKey(base, wf, 'active')),
    limitOf(KEYS[2], 'wf:' .. wf) or '', limitOf(KEYS[2], 'wf:' .. wf .. ':group') or '',
    tonumber(f[1] or 0), tonumber(f[2] or 0), perGroup, omitted,
    limitOf(KEYS[2], 'wf:' .. wf .. ':paused') and 1 or 0,
    limitOf(KEYS[2], 'wf:' .. wf .. ':rate') or '', limitOf(KEYS[2], 'wf:' .. wf .. ':rate-ms') or '',
    limitOf(KEYS[2], 'wf:' .. wf .. ':group-rate') or '', limitOf(KEYS[2], 'wf:' .. wf .. ':group-rate-ms') or '',
    tonumber(f[5] or 0), waits[1], waits[2], waits[3], waits[4] }
end
return reply
