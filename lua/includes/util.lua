-- util: key names, numbers, chunked commands and publishing (`-- @include util`). No needs; no
-- per-call state (STEADY_NUMBERS and STEADY_TEXTS are caches of pure conversions, kept across calls).
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

-- A number a caller sends unchanged call after call (a retention, a lease length), by its text:
-- one strtod per text, kept by the library, instead of one per call. Bounded: a cache that
-- reaches CACHED_NUMBERS texts starts over.
local CACHED_NUMBERS = 64
local STEADY_NUMBERS = { count = 0 }
local function steadyNumber(text)
  local n = STEADY_NUMBERS[text]
  if n then return n end
  n = tonumber(text)
  if STEADY_NUMBERS.count >= CACHED_NUMBERS then STEADY_NUMBERS = { count = 0 } end
  STEADY_NUMBERS[text], STEADY_NUMBERS.count = n, STEADY_NUMBERS.count + 1
  return n
end

-- The text of a steady number (a retention, a lease length: the same few in every call), kept
-- by the library as STEADY_NUMBERS keeps parses: string.format is a vfprintf. Bounded likewise.
local STEADY_TEXTS = { count = 0 }
local function steadyText(n)
  local text = STEADY_TEXTS[n]
  if text then return text end
  text = string.format('%d', n)
  if STEADY_TEXTS.count >= CACHED_NUMBERS then STEADY_TEXTS = { count = 0 } end
  STEADY_TEXTS[n], STEADY_TEXTS.count = text, STEADY_TEXTS.count + 1
  return text
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

-- Whether a run's 'waited' field (space-separated targets, see finishRun) has its end announced
-- on the run's done channel, the target '1'.
local function waitedOnDone(waited)
  return waited and string.find(' ' .. waited .. ' ', ' 1 ', 1, true) ~= nil
end
