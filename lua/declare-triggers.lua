#!lua
--[[
  declare-triggers: at a worker's bootstrap, subscribe its workflows to the events their code
  names (`@Workflow({ on })`), and unsubscribe them from the events it no longer names: among
  declarations the latest bootstrap wins, as for caps and schedules. Sent for every workflow the
  worker runs, those with no `on` included, so a deploy that drops a workflow's `on` leaves no
  subscription behind. Reads every workflow's subscriptions before its first write.

  Includes: util

  KEYS[1] workflows  set (not touched: names the namespace's slot)
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  Also, named from the key base, in the same slot: per workflow 'wf:<name>:on' (set: its event
  names) and per event 'on:<event>' (hash: workflow -> max attempts of the runs it starts, '' for
  the default), which lua/publish.lua reads.
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2 ..] per workflow: its name, its max attempts, E, then its E event names (sorted)
  Reply: flat, per workflow whose subscriptions changed: { name, events added (space-separated),
         events removed (space-separated) }
]]
-- @include util

local base = ARGV[1]

-- Every read first.
local workflows = {}
local i = 2
while i <= #ARGV do
  local count = tonumber(ARGV[i + 2])
  local wf = { name = ARGV[i], attempts = ARGV[i + 1], events = {}, wanted = {} }
  for k = 1, count do
    local event = ARGV[i + 2 + k]
    wf.events[k], wf.wanted[event] = event, true
  end
  wf.key = wfKey(base, wf.name, 'on')
  wf.had = {}
  for _, event in ipairs(redis.call('SMEMBERS', wf.key)) do wf.had[event] = true end
  workflows[#workflows + 1] = wf
  i = i + 3 + count
end

local changed = {}
for _, wf in ipairs(workflows) do
  local added, removed = {}, {}
  for event in pairs(wf.had) do
    if not wf.wanted[event] then
      removed[#removed + 1] = event
      redis.call('HDEL', base .. 'on:' .. event, wf.name)
      redis.call('SREM', wf.key, event)
    end
  end
  for _, event in ipairs(wf.events) do
    -- Written again each time: the workflow's attempts may have changed.
    redis.call('HSET', base .. 'on:' .. event, wf.name, wf.attempts)
    if not wf.had[event] then
      added[#added + 1] = event
      redis.call('SADD', wf.key, event)
    end
  end
  if #added > 0 or #removed > 0 then
    table.sort(removed)
    changed[#changed + 1] = wf.name
    changed[#changed + 1] = table.concat(added, ' ')
    changed[#changed + 1] = table.concat(removed, ' ')
  end
end
return changed
