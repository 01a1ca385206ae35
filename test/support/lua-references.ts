import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Which include defines each top-level name of lua/includes/, and which of those names a piece
 * of Lua uses: how the specs check that a script and an include name every include they use
 * (the EVALSHA path inlines only those: a name left out is an undefined global there, while the
 * function library, which holds every include, would not notice).
 */
export interface LuaIncludeIndex {
  /** Top-level name -> the include that defines it. */
  owner: Map<string, string>;
  /** Include -> the includes it declares with `-- @needs`. */
  needs: Map<string, string[]>;
  /** Include -> its text. */
  text: Map<string, string>;
}

const DEFINITION = /^local (?:function ([A-Za-z_]\w*)|([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*))/gm;
/** Comments and string literals: names in them are not uses. */
const NOT_CODE = /--\[(=*)\[[\s\S]*?\]\1\]|--[^\n]*|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|\[(=*)\[[\s\S]*?\]\2\]/g;

export function luaIncludeIndex(luaDir: string): LuaIncludeIndex {
  const index: LuaIncludeIndex = { owner: new Map(), needs: new Map(), text: new Map() };
  for (const file of readdirSync(join(luaDir, 'includes')).filter((f) => f.endsWith('.lua'))) {
    const name = file.slice(0, -'.lua'.length);
    const text = readFileSync(join(luaDir, 'includes', file), 'utf8');
    index.text.set(name, text);
    index.needs.set(name, /^-- @needs (.+)$/m.exec(text)?.[1].split(/\s*,\s*/) ?? []);
    for (const m of text.matchAll(DEFINITION)) {
      for (const defined of (m[1] ?? m[2]).split(/\s*,\s*/)) {
        const previous = index.owner.get(defined);
        if (previous && previous !== name) throw new Error(`${defined} is defined by both ${previous}.lua and ${name}.lua`);
        index.owner.set(defined, name);
      }
    }
  }
  return index;
}

/** The includes whose names `code` uses (other than `self`, an include's own names). */
export function includesUsed(index: LuaIncludeIndex, code: string, self?: string): Set<string> {
  const used = new Set<string>();
  for (const m of code.replace(NOT_CODE, ' ').matchAll(/(?<![.:\w])([A-Za-z_]\w*)/g)) {
    const owner = index.owner.get(m[1]);
    if (owner && owner !== self) used.add(owner);
  }
  return used;
}

/** `includes` and every include they need, directly or not. */
export function withNeeds(index: LuaIncludeIndex, includes: Iterable<string>): Set<string> {
  const all = new Set<string>();
  const visit = (name: string) => {
    if (all.has(name)) return;
    all.add(name);
    (index.needs.get(name) ?? []).forEach(visit);
  };
  [...includes].forEach(visit);
  return all;
}
