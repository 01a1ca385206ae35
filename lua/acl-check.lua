#!lua flags=no-writes
--[[
  acl-check: which of the given permissions the calling ACL user lacks (the boot check of a
  process that connects as a named user, lib/redis/acl.check.ts). Reads and writes nothing: it
  asks Redis's ACL (redis.acl_check_cmd) about each command, then about the namespace's channels.
  The namespace's keys need no question: calling this declares one, which Redis refuses (NOPERM,
  before anything runs) unless the user may read and write it.

  Includes: none

  KEYS[1] limits   hash (any key of the namespace)
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] a channel of the namespace (its cancel channel)
  ARGV[2] the command the scripts publish with: 'publish', or 'spublish' on a cluster
  ARGV[3..] the permissions to check: a command ('hmget') or a command and subcommand ('client|setname')
  Reply: { each permission refused, in order, then '&<channel>' if the channel cannot be published to }
]]
-- Asked without a channel: the channel is asked on its own, below. (Quoted keys: `publish` is
-- also the name of a helper of includes/util.lua, which this script does not use.)
local PUBSUB = {
  ['publish'] = true, ['spublish'] = true, ['subscribe'] = true, ['ssubscribe'] = true, ['unsubscribe'] = true, ['sunsubscribe'] = true,
}
local key = KEYS[1]

-- Every other command is asked with the declared key as each argument: Redis 7.0 crashes when
-- acl_check_cmd gets too few arguments for a command's keys (SET, ZUNIONSTORE), and that key is
-- one the user may read and write, so a refusal is the command's.
local function allowed(permission)
  local command, sub = string.match(permission, '^([^|]+)|(.+)$')
  if command then return redis.acl_check_cmd(command, sub, key, key, key, key) end
  if PUBSUB[permission] then return redis.acl_check_cmd(permission) end
  return redis.acl_check_cmd(permission, key, key, key, key)
end

local denied = {}
for i = 3, #ARGV do
  if not allowed(ARGV[i]) then denied[#denied + 1] = ARGV[i] end
end
if allowed(ARGV[2]) and not redis.acl_check_cmd(ARGV[2], ARGV[1], 'm') then denied[#denied + 1] = '&' .. ARGV[1] end
return denied
