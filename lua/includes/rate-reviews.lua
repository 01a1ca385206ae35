-- rate-reviews: letting the groups a rate limit held back run again once the limit changed
-- (`-- @include rate-reviews`).
-- @needs util, limits, groups
--
-- A rate limit raised or removed lets the groups it held back (in `rate-held`, each until its old
-- window frees) run at once. A review moves them all to the workflow's `rate-review` zset and
-- flags it in the limits hash ('wf:<name>:rate-review', which a reserve reads with its other
-- limits: a workflow without a review pays no command for it). Batches then take groups off
-- rate-review (see reviewRateHeld): set-control's own calls, and every reserve of the workflow's
-- workers while the flag is set, whatever the controls say. So a review whose caller stopped
-- part-way (it died, a reply was lost) still finishes, and each group is reviewed once under the
-- limit of the time: one still without room is held again in rate-held, not in rate-review.

-- Starts a review of the groups held back now (see the top of this file).
local function startRateReview(base, limitsKey, workflow)
  local heldKey, reviewKey = wfKey(base, workflow, 'rate-held'), wfKey(base, workflow, 'rate-review')
  if redis.call('EXISTS', heldKey) == 0 then return end
  if redis.call('EXISTS', reviewKey) == 1 then
    -- A review still under way (two changes in a row): it takes these groups too.
    redis.call('ZUNIONSTORE', reviewKey, 2, reviewKey, heldKey, 'AGGREGATE', 'MIN')
    redis.call('DEL', heldKey)
  else
    redis.call('RENAME', heldKey, reviewKey)
  end
  local flag = 'wf:' .. workflow .. ':rate-review'
  redis.call('HSET', limitsKey, flag, 1)
  limitCache[flag], limitsDirty = 1, true
end

-- Takes up to `batch` groups off a review under way: each rejoins the round-robin if it has due
-- runs and room, or is held again by its limit. The batch that empties the review clears its
-- flag. Returns how many groups are left to review, and whether a group rejoined.
local function reviewRateHeld(base, limitsKey, seqKey, workflow, batch)
  local reviewKey = wfKey(base, workflow, 'rate-review')
  local joined = false
  local popped = redis.call('ZPOPMIN', reviewKey, batch)
  for i = 1, #popped, 2 do
    if activateGroup(base, limitsKey, seqKey, workflow, popped[i]) then joined = true end
  end
  local left = redis.call('ZCARD', reviewKey)
  if left == 0 then
    local flag = 'wf:' .. workflow .. ':rate-review'
    redis.call('HDEL', limitsKey, flag)
    limitCache[flag], limitsDirty = false, true
  end
  return left, joined
end
