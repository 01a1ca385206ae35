import { createHash } from 'node:crypto';
import { allScripts, includeNeeds, LUA_DIR, readInclude, type LuaScript, type ScriptName } from './lua.source';

/** The includes in the order the library inlines them: each needs (`-- @needs`) only those before it. */
const INCLUDE_ORDER = [
  'time',
  'util',
  'lanes',
  'wakes',
  'limits',
  'leases',
  'rates',
  'caps',
  'groups',
  'rate-reviews',
  'records',
  'waits',
  'event-waits',
  'slots',
  'finish',
  'origins',
  'claim',
  'claim-pass',
  'steps',
  'enqueue',
  'enqueue-options',
  'schedules',
  'batches',
];

/**
 * The scripts a worker's boot sends before it knows the namespace's layout, in the same write as
 * the connection's first check (see LuaScripts.atLayout): each also has a variant, named with
 * {@link AT_LAYOUT_SUFFIX}, that runs only at a layout the caller names.
 */
export const AT_LAYOUT_SCRIPTS: ReadonlySet<ScriptName> = new Set([
  'declare-limits',
  'set-control',
  'schedule-write',
  'declare-triggers',
  'reserve',
]);
export const AT_LAYOUT_SUFFIX = '_at_layout';
/** How an at-layout variant refuses: `SLUICE_LAYOUT <the layout found, or none>`, nothing done. */
export const LAYOUT_REFUSAL = 'SLUICE_LAYOUT';

/**
 * The prologue of an at-layout variant: its caller appended the namespace's layout marker (the
 * `schema` key) to the keys, and the lowest and highest layout it may run at to the arguments.
 * It takes them off, so the script's body sees the arguments of its plain variant, and refuses
 * with an error reply, before any write, at another layout or none.
 */
const AT_LAYOUT_GATE = [
  'local marker = table.remove(keys)',
  'local highest, lowest = tonumber(table.remove(args)), tonumber(table.remove(args))',
  "local found = redis.call('GET', marker)",
  'local layout = tonumber(found)',
  `if not layout or layout < lowest or layout > highest then return redis.error_reply('${LAYOUT_REFUSAL} ' .. (found or 'none')) end`,
];

/** A top-level `local a[, b] = <value>` of an include (a `local function` does not match). */
const TOP_LEVEL_LOCAL = /^local ([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*) = (.*)$/gm;

/**
 * Every script as one Redis Functions library (`FUNCTION LOAD`, called with `FCALL`).
 *
 * Why: a script run with EVALSHA executes its whole text on every call, and the includes define
 * about 80 helper closures before the script's own code starts; with the garbage they leave, that
 * prologue is the largest single cost of a hot script's call. A library's top level runs once, at
 * load; each call runs only its script's body.
 *
 * How the scripts stay unchanged: the library declares `KEYS` and `ARGV` as locals that each
 * function sets from its arguments before running its body (so the helpers read them as in an
 * EVAL script), and an include's per-call state — a top-level `local` that is not an UPPER_CASE constant, such
 * as the caches of limits read in this call — is declared bare at the top and given its initial
 * value again at the start of every call of a script that includes it: no call sees another's.
 *
 * The library's name holds the hash of its code (`sluice_<hash>`), as do its function names, so
 * the processes of two versions of Sluice sharing a server each call their own (rolling deploys).
 */
export interface LuaLibrary {
  /** `sluice_<hash of the code>`. */
  name: string;
  /** The library's source, as sent to `FUNCTION LOAD`. */
  code: string;
  /** The name a script is called by with `FCALL`. */
  functionName(script: ScriptName): string;
}

const built = new Map<string, LuaLibrary>();

/** The library of the scripts in `dir`, built once per process. */
export function luaLibrary(dir = LUA_DIR): LuaLibrary {
  let library = built.get(dir);
  if (!library) built.set(dir, (library = buildLibrary(allScripts(dir), dir)));
  return library;
}

export function buildLibrary(scripts: readonly LuaScript[], dir = LUA_DIR): LuaLibrary {
  INCLUDE_ORDER.forEach((name, i) => {
    const later = includeNeeds(name, dir).filter((need) => !INCLUDE_ORDER.slice(0, i).includes(need));
    if (later.length > 0) throw new Error(`lua/includes/${name}.lua needs ${later.join(', ')}, which INCLUDE_ORDER must put before it`);
  });
  const includes = INCLUDE_ORDER.map((name) => perCallState(name, readInclude(name, dir)));
  checkDirtyWrites(includes, [
    ...INCLUDE_ORDER.map((name) => ({ file: `lua/includes/${name}.lua`, text: readInclude(name, dir) })),
    ...scripts.map((script) => ({ file: `lua/${script.name}.lua`, text: script.body })),
  ]);
  const resetsOf = new Map(includes.filter((include) => include.resets.length > 0).map((include) => [include.name, include.resets]));
  const parts = [
    'local KEYS, ARGV',
    ...includes.map((include) => include.text),
    'local bodies = {}',
    ...scripts.map((script) => `bodies['${script.name}'] = function()\n${script.body}\nend`),
  ];
  const registrations = scripts.map((script) => {
    checkIncludeOrder(script);
    const resets = script.includes.flatMap((name) => (resetsOf.has(name) ? [`-- resets ${name}`, ...resetsOf.get(name)!] : []));
    return { script, resets };
  });
  // The hash covers the registrations too (the function names left out: they hold the hash).
  const hash = createHash('sha1')
    .update(
      [
        ...parts,
        ...registrations.map(({ script, resets }) => registration(script.name, script, resets)),
        ...AT_LAYOUT_GATE,
        ...AT_LAYOUT_SCRIPTS,
      ].join('\n'),
    )
    .digest('hex')
    .slice(0, 16);
  const name = `sluice_${hash}`;
  const names = new Map(scripts.map((script) => [script.name, `${name}_${script.name.replace(/-/g, '_')}`]));
  // Asked on every call: looked up, not built.
  const functionName = (script: ScriptName) => names.get(script) ?? `${name}_${script.replace(/-/g, '_')}`;
  const calls = registrations.flatMap(({ script, resets }) => [
    registration(functionName(script.name), script, resets),
    ...(AT_LAYOUT_SCRIPTS.has(script.name)
      ? [registration(functionName(script.name) + AT_LAYOUT_SUFFIX, script, resets, AT_LAYOUT_GATE)]
      : []),
  ]);
  return { name, code: [`#!lua name=${name}`, ...parts, ...calls].join('\n'), functionName };
}

/**
 * Registers one script's function: set KEYS and ARGV, reset its includes' per-call state, run its
 * body. The resets are written out in each function rather than called (one function per include,
 * in a loop): a call of complete then made 12 Lua calls and as many global reads before its body.
 */
function registration(functionName: string, script: LuaScript, resets: string[], prologue: string[] = []): string {
  return [
    `do local body = bodies['${script.name}']`,
    `redis.register_function{ function_name = '${functionName}', flags = { ${script.flags.map((flag) => `'${flag}'`).join(', ')} }, callback = function(keys, args)`,
    ...prologue,
    'KEYS, ARGV = keys, args',
    ...resets,
    'return body()',
    'end } end',
  ].join('\n');
}

/**
 * Splits an include's per-call state from its constants: `local x = value` becomes `local x`,
 * and `x = value` goes into the include's reset (see {@link LuaLibrary}). State that starts as
 * empty tables (`local x, y = {}, {}`) is made once, at load, and emptied at a call's start only
 * if the last call wrote to one of them: a table made and dropped per call costs Redis its
 * allocation, its frees and the garbage collector's work. An include with such tables declares
 * its flag, `local <include>Dirty = false`, which every write to them sets (see
 * {@link checkDirtyWrites}): a call that wrote none pays one test for them all, where looking
 * into each table (`next`, a C call) cost Redis about 500 instructions per table and call.
 */
function perCallState(name: string, text: string): { name: string; text: string; resets: string[]; tables: string[] } {
  const flag = dirtyFlag(name);
  const resets: string[] = [];
  const tables: string[] = [];
  let flagged = false;
  const split = text.replace(TOP_LEVEL_LOCAL, (line, names: string, value: string) => {
    const list = names.split(/\s*,\s*/);
    const constant = list.every((n) => /^[A-Z][A-Z0-9_]*$/.test(n)) && !/\b(KEYS|ARGV)\b/.test(value);
    if (constant) return line;
    if (!balanced(value)) throw new Error(`lua/includes/${name}.lua: per-call state \`${names}\` must get its initial value on one line`);
    if (names === flag && value.trim() === 'false') {
      flagged = true;
      return line;
    }
    if (value.trim() === list.map(() => '{}').join(', ')) {
      tables.push(...list);
      return line;
    }
    resets.push(`${names} = ${value}`);
    return `local ${names}`;
  });
  if (tables.length > 0 && !flagged) {
    throw new Error(`lua/includes/${name}.lua: per-call tables (${tables.join(', ')}) need their flag: local ${flag} = false`);
  }
  if (tables.length > 0) resets.push(`if ${flag} then ${flag} = false ${tables.map(clearTable).join(' ')} end`);
  return { name, text: split, resets, tables };
}

/** The name of the flag an include's per-call tables share: `claim-pass` -> `claimPassDirty`. */
function dirtyFlag(include: string): string {
  return `${include.replace(/-(\w)/g, (_, c: string) => c.toUpperCase())}Dirty`;
}

/**
 * Refuses a write to a per-call table (`t[k] = v`, also in a multiple assignment) on a line that
 * does not set its include's flag too: the next call would not empty the table, and would read
 * this call's entries as its own.
 */
function checkDirtyWrites(includes: { name: string; tables: string[] }[], sources: { file: string; text: string }[]): void {
  for (const { name, tables } of includes) {
    // `flag = true`, or the flag among the targets of a multiple assignment (`t[k], flag = v, true`).
    const flagSet = new RegExp(`\\b${dirtyFlag(name)}\\b[^=]*=(?!=)`);
    for (const table of tables) {
      // Not a write into an entry (`t[k][j] = v`), nor a removal (`t[k] = nil`): the table held
      // that entry, so the write that made it set the flag already.
      const write = new RegExp(`\\b${table}\\[[^\\]]*\\]\\s*(?:,|=(?!=))`);
      const removal = new RegExp(`\\b${table}\\[[^\\]]*\\]\\s*=\\s*nil\\b`);
      for (const { file, text } of sources) {
        for (const line of text.split('\n')) {
          if (!line.trimStart().startsWith('--') && write.test(line) && !removal.test(line) && !flagSet.test(line)) {
            throw new Error(
              `${file}: \`${line.trim()}\` writes to the per-call table ${table}, so it must set ${dirtyFlag(name)} = true on its line`,
            );
          }
        }
      }
    }
  }
}

/**
 * Most entries a per-call table may have had for it to be emptied in place; a larger one is
 * replaced, so that no call pays for scanning a big table that holds nothing (`next` walks its slots).
 */
const CLEARED_IN_PLACE = 32;

/**
 * The reset of per-call state that starts as an empty table (once its include's flag says a call
 * wrote to its tables): empties it where the last call left entries. In place, not by making a
 * new table: a script that always fills it (complete's lane caches) would otherwise leave a
 * table of garbage per call, for Redis to allocate, free and collect.
 */
function clearTable(name: string): string {
  return (
    `if next(${name}) ~= nil then local n = 0 for k in next, ${name} do ${name}[k] = nil n = n + 1 end ` +
    `if n > ${CLEARED_IN_PLACE} then ${name} = {} end end`
  );
}

function balanced(value: string): boolean {
  const count = (pattern: RegExp) => value.match(pattern)?.length ?? 0;
  return count(/[({[]/g) === count(/[)}\]]/g);
}

function checkIncludeOrder(script: LuaScript): void {
  const positions = script.includes.map((name) => INCLUDE_ORDER.indexOf(name));
  if (positions.some((position, i) => position < 0 || (i > 0 && position < positions[i - 1]))) {
    throw new Error(
      `lua/${script.name}.lua: includes ${script.includes.join(', ')}; the library knows ${INCLUDE_ORDER.join(', ')}, in that order`,
    );
  }
}
