-- time: the call's clock (`-- @include time`). No needs.
--
-- Milliseconds from the Redis clock: workers' clocks may be skewed, the server's is the one truth.
-- Read once per call: every time a call records (a start, a lease, a rate window) is the same.

-- The seconds of the last TIME any call read, as text and as a number, kept by the library: a
-- call within the same second (most) skips one of the two strtods. Strings are interned, so the
-- comparison is a pointer's.
local LAST_SECOND = { text = '', ms = 0 }

local callNow = nil
local function nowMs()
  if not callNow then
    local t = redis.call('TIME')
    if t[1] ~= LAST_SECOND.text then LAST_SECOND.text, LAST_SECOND.ms = t[1], tonumber(t[1]) * 1000 end
    callNow = LAST_SECOND.ms + math.floor(tonumber(t[2]) / 1000)
  end
  return callNow
end

-- nowMs() as text, formatted once per call: a number handed to redis.call is formatted anew
-- each time (an snprintf), and a batch of enqueues writes the time into every run.
local callNowText = nil
local function nowText()
  if not callNowText then callNowText = string.format('%d', nowMs()) end
  return callNowText
end

-- An integer (a time in ms, a score, a count) as text for redis.call: '%d' prints it as an
-- integer, where a number handed over as is goes through '%.17g', several times the work.
local function intText(n)
  if n == callNow then return nowText() end
  return string.format('%d', n)
end
