-- origins: who set a fleet-wide setting (`-- @include origins`). No needs.
--
-- Who set a fleet-wide setting that code declares (the namespace cap, a workflow's cap, every
-- group's default cap, a workflow's and every group's default rate limit): the hash
-- '<base>runtime-limits' holds, for each limits-hash field an operator set at runtime, the value
-- the code declared when it was set ('' = none; a rate limit as '<max>/<ms>'). A field with no
-- entry holds the code's value — as does every field the previous version wrote.
--
-- Why the declared value is kept: a worker bootstrap leaves a runtime value alone while its code
-- declares what the operator overrode, and replaces it (dropping the entry) once the code
-- declares something else: the operator wins until the code changes.

local function runtimeLimitsKey(base)
  return base .. 'runtime-limits'
end

-- The declaration a runtime value of `field` overrides, or false if the field holds the code's.
local function overriddenDeclaration(base, field)
  return redis.call('HGET', runtimeLimitsKey(base), field) or false
end

-- What a bootstrap declaring `declared` for a field does, given overriddenDeclaration's answer:
-- 'kept' (a runtime value overrides this same declaration: leave it), 'dropped' (it overrode
-- another one: the code changed, the declaration wins), or '' (the field is the code's).
local function declarationOutcome(overridden, declared)
  if overridden == false then return '' end
  if overridden == declared then return 'kept' end
  return 'dropped'
end

-- Records who wrote `field` (a write: call it after the checks). A bootstrap's write makes it the
-- code's; a runtime one records the declaration it overrides (the value it replaces, if that was
-- the code's), unless it sets that declaration again, which hands the field back to the code.
local function recordSetter(base, field, byCode, overridden, previous, value)
  local declared = overridden
  if declared == false then declared = previous end
  if byCode or value == declared then
    redis.call('HDEL', runtimeLimitsKey(base), field)
  else
    redis.call('HSET', runtimeLimitsKey(base), field, declared)
  end
end
