-- enqueue-options: the options of an enqueue call (`-- @include enqueue-options`).
-- @needs records
--
-- The scripts that enqueue one run from a caller's options (lua/enqueue.lua,
-- lua/enqueue-dedupe.lua) read them alike: fixed arguments first, then the options that differ
-- from their defaults, as name and value pairs.

-- The options an enqueue script's caller sent past its fixed arguments, ARGV[from] on, as name
-- and value pairs (only those that differ from their defaults; see
-- lib/redis/commands/enqueue.command.ts): priority, delayMs, runAt, attempts, group, trace,
-- timeoutMs. An unknown name ends the script with an error reply naming `script`.
local function enqueueOptions(from, script)
  local priority, delayMs, runAt, attempts, group, trace, timeoutMs = '0', '0', '', DEFAULT_MAX_ATTEMPTS, '', '', ''
  for i = from, #ARGV, 2 do
    local name, value = ARGV[i], ARGV[i + 1]
    if name == 'priority' then priority = value
    elseif name == 'delay' then delayMs = value
    elseif name == 'at' then runAt = value
    elseif name == 'attempts' then attempts = value
    elseif name == 'group' then group = value
    elseif name == 'trace' then trace = value
    elseif name == 'timeout' then timeoutMs = value
    else error({ err = 'ERR ' .. script .. ': unknown option ' .. tostring(name) }) end
  end
  return priority, delayMs, runAt, attempts, group, trace, timeoutMs
end
