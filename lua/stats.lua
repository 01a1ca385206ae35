--[[
  stats: a consistent snapshot of counts and caps, read without scanning runs: queues and sets
  are counted, finished runs are running totals.

  KEYS[1] leases  zset
  KEYS[2] limits  hash
  ARGV[1] key base '{prefix:namespace}:'
  ARGV[2] 1 to include each group with due runs or active runs, 0 not to
  ARGV[3..] workflow names, or none for every registered workflow
  Reply: { namespace active, namespace cap or '', per workflow: { name, waiting, delayed, active,
           cap or '', group default cap or '', completed, failed, { per group: group, waiting,
           active, cap or '' … } } … }
]]
-- @include common

local base = ARGV[1]
local workflows = {}
for i = 3, #ARGV do workflows[#workflows + 1] = ARGV[i] end
if #workflows == 0 then workflows = redis.call('SMEMBERS', base .. 'workflows') end
table.sort(workflows)

local reply = { redis.call('ZCARD', KEYS[1]), limitOf(KEYS[2], 'ns') or '' }
for _, wf in ipairs(workflows) do
  local groups = redis.call('SMEMBERS', wfKey(base, wf, 'groups'))
  local waiting = dueCount(laneOf(base, wf, ''))
  local perGroup = {}
  for _, g in ipairs(groups) do
    local lane = laneOf(base, wf, g)
    local due = dueCount(lane)
    waiting = waiting + due
    if ARGV[2] == '1' then
      perGroup[#perGroup + 1] = { g, due, redis.call('SCARD', lane .. 'active'), groupLimit(KEYS[2], wf, g) or '' }
    end
  end
  local finished = redis.call('HMGET', wfKey(base, wf, 'stats'), 'completed', 'failed')
  reply[#reply + 1] = { wf, waiting, redis.call('ZCARD', wfKey(base, wf, 'delayed')), redis.call('SCARD', wfKey(base, wf, 'active')),
    limitOf(KEYS[2], 'wf:' .. wf) or '', limitOf(KEYS[2], 'wf:' .. wf .. ':group') or '',
    tonumber(finished[1] or 0), tonumber(finished[2] or 0), perGroup }
end
return reply
