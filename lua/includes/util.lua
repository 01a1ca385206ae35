-- util: key names, numbers, chunked commands and publishing (`-- @include util`). No needs; no
-- per-call state (its memos, e.g. STEADY_NUMBERS, cache pure results across calls).
--
-- Key names follow lib/redis/redis.keys.ts; keep the two in step.

-- The keys of a workflow: base .. 'wf:' .. name .. ':' .. suffix.
local function wfKey(base, workflow, suffix)
  return base .. 'wf:' .. workflow .. ':' .. suffix
end

-- Runs `command key item…` in chunks of `per` items: Lua's unpack is bounded.
local function callChunked(command, key, items, per)
  for i = 1, #items, per do
    redis.call(command, key, unpack(items, i, math.min(i + per - 1, #items)))
  end
end

-- Caches of pure results, kept by the library across calls: a hot call converts the same few
-- values each time. A memo holds `values` by key and starts over once it holds MEMO_SIZE of
-- them (a caller may send any).
local MEMO_SIZE = 64
local function newMemo()
  return { count = 0, values = {} }
end
local function remember(memo, key, value)
  if memo.count >= MEMO_SIZE then memo.count, memo.values = 0, {} end
  memo.values[key], memo.count = value, memo.count + 1
  return value
end

-- A number a caller sends unchanged call after call (a retention, a lease length), by its text:
-- one strtod per text instead of one per call.
local STEADY_NUMBERS = newMemo()
local function steadyNumber(text)
  return STEADY_NUMBERS.values[text] or remember(STEADY_NUMBERS, text, tonumber(text))
end

-- The text of such a number, for redis.call: string.format is a vfprintf.
local STEADY_TEXTS = newMemo()
local function steadyText(n)
  return STEADY_TEXTS.values[n] or remember(STEADY_TEXTS, n, string.format('%d', n))
end

-- A count or flag an argument carries as text: tonumber is a strtod, and most are '0' or '1'.
local function smallNumber(text)
  if text == '0' then return 0 elseif text == '1' then return 1 end
  return tonumber(text)
end

-- Publishes on one of the namespace's channels. On a Redis Cluster they are sharded channels
-- (SPUBLISH: the channel lives in the namespace's slot, so only its shard carries the message,
-- where PUBLISH would copy it to every node); subscribers match (lib/redis/pubsub.channels.ts).
-- The caller says which: the last slot-guard key, always the last key, is `slot-guard:sharded`
-- on a cluster (RedisKeys.slotGuard); a single server's calls send no guard.
local function publish(channel, message)
  local last = KEYS[#KEYS]
  if last and string.sub(last, -8) == ':sharded' then
    return redis.call('SPUBLISH', channel, message)
  end
  return redis.call('PUBLISH', channel, message)
end

-- Whether a run's 'waited' field (space-separated targets, see finishRun) names `target`: '1',
-- the run's done channel, or a process's inbox id.
local function waitedBy(waited, target)
  return waited and string.find(' ' .. waited .. ' ', ' ' .. target .. ' ', 1, true) ~= nil
end

-- Whether a run's end is announced on its done channel.
local function waitedOnDone(waited)
  return waitedBy(waited, '1')
end
