#!lua flags=no-writes
--[[
  acl-check: which of the given permissions the calling ACL user lacks (the boot check of a
  process that connects as a named user, lib/redis/acl.check.ts). Reads and writes nothing: it
  asks Redis's ACL (redis.acl_check_cmd) about each command, then, with commands the user holds,
  about the namespace's keys (read, write) and channels.

  Includes: none

  KEYS[1] limits   hash (any key of the namespace: declaring it already checks some access)
  KEYS[2], KEYS[3] the slot guard: keys that never exist (lib/redis/lua.scripts.ts)
  ARGV[1] a channel of the namespace (its cancel channel)
  ARGV[2] the command the scripts publish with: 'publish', or 'spublish' on a cluster
  ARGV[3..] the permissions to check: a command ('hmget') or a command and subcommand ('client|setname')
  Reply: { each permission refused, in order, then '%R~<key>' / '%W~<key>' if the key cannot be
         read / written, '&<channel>' if the channel cannot be published to }
]]
local function allowed(permission)
  local command, sub = string.match(permission, '^([^|]+)|(.+)$')
  if command then return redis.acl_check_cmd(command, sub) end
  return redis.acl_check_cmd(permission)
end

local denied = {}
for i = 3, #ARGV do
  if not allowed(ARGV[i]) then denied[#denied + 1] = ARGV[i] end
end
-- A refused command says nothing about the key or channel: each is asked with one the user holds.
if allowed('hmget') and not redis.acl_check_cmd('hmget', KEYS[1], 'f') then denied[#denied + 1] = '%R~' .. KEYS[1] end
if allowed('hset') and not redis.acl_check_cmd('hset', KEYS[1], 'f', 'v') then denied[#denied + 1] = '%W~' .. KEYS[1] end
if allowed(ARGV[2]) and not redis.acl_check_cmd(ARGV[2], ARGV[1], 'm') then denied[#denied + 1] = '&' .. ARGV[1] end
return denied
