-- batches: a batch run's members (docs/batches.md) ending with their batch (`-- @include batches`).
-- @needs util, finish
--
-- A batch run (field 'batchOf': its members' workflow) lists its members in batch:<id>, in enqueue
-- order. A member waits in state 'batched' with its 'batch' field naming the batch; one that left
-- it (cancelled alone) keeps its own outcome.

-- Ends every member still in batch `id` in `state` (`field` 'error' or 'result', `payload` the
-- same for each), told to its waiters as any run's end, and tallied in `tally` under `memberOf`
-- (see countFinished, which the caller calls after its last write); the member list expires with
-- the batch. Reads the members, then writes.
local function endMembers(base, id, memberOf, state, field, payload, now, ttlMs, tally)
  local listKey = base .. 'batch:' .. id
  local ending = {}
  for _, memberId in ipairs(redis.call('LRANGE', listKey, 0, -1)) do
    local memberKey = base .. 'run:' .. memberId
    local m = redis.call('HMGET', memberKey, 'state', 'batch', 'waited', 'links')
    if m[1] == 'batched' and m[2] == id then ending[#ending + 1] = { memberId, memberKey, m[3], m[4] == '1' } end
  end
  for _, m in ipairs(ending) do
    finishRun(base, m[2], m[1], memberOf, state, field, payload, now, ttlMs, m[3], m[4])
    tallyFinished(tally, memberOf, m[1])
  end
  redis.call('PEXPIRE', listKey, steadyText(ttlMs))
end
