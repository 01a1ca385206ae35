import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Where the scripts live, both from `lib/redis` (ts-node, tests) and `dist/redis` (published). */
export const LUA_DIR = join(__dirname, '..', '..', 'lua');

export type ScriptName =
  | 'activate-groups'
  | 'migrate-group-due'
  | 'migrate-lock'
  | 'enqueue'
  | 'enqueue-many'
  | 'enqueue-dedupe'
  | 'reserve'
  | 'complete'
  | 'fail'
  | 'save-steps'
  | 'extend-leases'
  | 'release'
  | 'declare-limits'
  | 'park'
  | 'set-limits'
  | 'stats'
  | 'watch'
  | 'cancel'
  | 'set-control'
  | 'progress'
  | 'schedule-write'
  | 'schedule-control'
  | 'schedule-plan'
  | 'schedule-list'
  | 'migrate-schedule-index'
  | 'migrate-lean-records'
  | 'list-runs'
  | 'retry'
  | 'remove'
  | 'suspend'
  | 'continue'
  | 'signal'
  | 'send-event'
  | 'publish'
  | 'declare-triggers'
  | 'acl-check'
  | 'enqueue-batch'
  | 'batch-members'
  | 'finish-batch';

export interface LuaScript {
  name: ScriptName;
  /** The command name registered with ioredis: `sluice_` + the file name. */
  command: string;
  /** Every key it declares, the two slot-guard keys (the last two) included. */
  numberOfKeys: number;
  /** The whole script as EVAL runs it: its includes inlined. */
  source: string;
  /** The includes it names (`-- @include <file>`, listed again in its header), in order. */
  includes: string[];
  /** Its own code: `source` without the header and the includes. */
  body: string;
  /** Its Redis 7 flags (`#!lua flags=…`), e.g. `['allow-oom']`. */
  flags: string[];
}

const HEADER = /^#!lua[^\n]*\n--\[\[([\s\S]*?)\]\]/;
const INCLUDE = /^-- @include (\S+)\s*$/gm;
/** The header's list of includes: `Includes: a, b` (continued on indented lines) or `Includes: none`. */
const HEADER_INCLUDES = /^[ \t]*Includes:([\s\S]*?)(?=\n[ \t]*(?:\n|KEYS\[))/m;
/** An include's own includes (`-- @needs a, b`), which a script must include before it. */
const NEEDS = /^-- @needs (.+)$/m;

/**
 * Reads `lua/<name>.lua`, inlines `-- @include <file>` lines from `lua/includes/`, and takes the
 * key count from the header's highest `KEYS[n]`, so the header is the single source of truth.
 * Every script starts with `#!lua` and the Redis 7 flags it needs: `no-writes` for the readers,
 * `allow-oom` for the scripts that free memory (they must work when memory is full); the others
 * are refused whole, before they run, while Redis is out of memory.
 */
export function loadScript(name: string, dir = LUA_DIR): LuaScript {
  const raw = readFileSync(join(dir, `${name}.lua`), 'utf8');
  const source = raw.replace(INCLUDE, (_, include: string) => readInclude(include, dir));
  const header = HEADER.exec(raw)?.[1];
  if (!header || !/Reply:/.test(header))
    throw new Error(`lua/${name}.lua must start with #!lua and a --[[ … ]] header listing KEYS, ARGV and the Reply`);
  const keyNumbers = [...header.matchAll(/KEYS\[(\d+)\]/g)].map((m) => Number(m[1]));
  const numberOfKeys = Math.max(0, ...keyNumbers);
  if (!new RegExp(`KEYS\\[${numberOfKeys - 1}\\], KEYS\\[${numberOfKeys}\\] the slot guard`).test(header)) {
    throw new Error(`lua/${name}.lua: its header's last two KEYS must be the slot guard (see SLOT_GUARD_KEYS)`);
  }
  const includes = [...raw.matchAll(INCLUDE)].map((m) => m[1]);
  checkIncludes(name, header, includes, dir);
  const body = raw.replace(HEADER, '').replace(INCLUDE, '');
  const flags = /^#!lua flags=(\S+)/.exec(raw)?.[1].split(',') ?? [];
  return { name: name as ScriptName, command: `sluice_${name.replace(/-/g, '_')}`, numberOfKeys, source, includes, body, flags };
}

/** The text of `lua/includes/<name>.lua`. */
export function readInclude(name: string, dir = LUA_DIR): string {
  return readFileSync(join(dir, 'includes', `${name}.lua`), 'utf8');
}

/** The includes `lua/includes/<name>.lua` uses: its `-- @needs` line. */
export function includeNeeds(name: string, dir = LUA_DIR): string[] {
  return (
    NEEDS.exec(readInclude(name, dir))?.[1]
      .trim()
      .split(/\s*,\s*/) ?? []
  );
}

/**
 * A script's header names its includes, and it includes what they need before them: EVALSHA
 * runs the script with only these inlined, so a helper from an include left out would be an
 * undefined global there (the library, which holds every include, would not notice).
 */
function checkIncludes(name: string, header: string, includes: string[], dir: string): void {
  const listed = HEADER_INCLUDES.exec(header)?.[1]
    .split(/[\s,]+/)
    .filter((include) => include && include !== 'none');
  if (!listed || listed.join() !== includes.join()) {
    throw new Error(`lua/${name}.lua: its header must list its includes, in order (Includes: ${includes.join(', ') || 'none'})`);
  }
  includes.forEach((include, i) => {
    const missing = includeNeeds(include, dir).filter((need) => !includes.slice(0, i).includes(need));
    if (missing.length > 0)
      throw new Error(`lua/${name}.lua: includes/${include}.lua needs ${missing.join(', ')}, to be included before it`);
  });
}

const loaded = new Map<string, readonly LuaScript[]>();

/** Every script in `dir`, read once per process (the EVALSHA fallback and the library share them). */
export function allScripts(dir = LUA_DIR): readonly LuaScript[] {
  let scripts = loaded.get(dir);
  if (!scripts) loaded.set(dir, (scripts = scriptNames(dir).map((name) => loadScript(name, dir))));
  return scripts;
}

/** Every script file in `lua/` (not the includes). */
export function scriptNames(dir = LUA_DIR): string[] {
  return readdirSync(dir)
    .filter((file) => file.endsWith('.lua'))
    .map((file) => file.slice(0, -'.lua'.length))
    .sort();
}
