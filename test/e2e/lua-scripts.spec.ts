import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type Redis from 'ioredis';
import { loadScript, LUA_DIR, scriptNames } from '../../lib/redis/lua.scripts';
import { rawRedis } from '../support/app';
import { scriptsOn } from '../support/scripts';

/** The scripts the worker and client need; new ones are covered too through scriptNames(). */
const CORE = ['complete', 'declare-limits', 'enqueue', 'extend-leases', 'fail', 'release', 'reserve', 'save-steps'];
const ALL = scriptNames();

describe('lua scripts', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = rawRedis();
  });
  afterAll(() => redis.quit());

  it('finds every script file in lua/ (and not the includes)', () => {
    expect(ALL).toEqual(expect.arrayContaining(CORE));
    expect(ALL).not.toContain('common');
    expect([...ALL].sort()).toEqual(ALL);
  });

  describe.each(ALL)('%s.lua', (name) => {
    const raw = readFileSync(join(LUA_DIR, `${name}.lua`), 'utf8');

    it('starts with a header listing KEYS, ARGV and the Reply', () => {
      const header = /^--\[\[([\s\S]*?)\]\]/.exec(raw)?.[1];
      expect(header).toBeDefined();
      expect(header).toMatch(/^\s*KEYS\[1\]\s+\S/m);
      expect(header).toMatch(/^\s*ARGV\[1(\.\.)?\]/m);
      expect(header).toMatch(/^\s*Reply:\s*\S/m);
    });

    it('takes its key count from the header and inlines its includes', () => {
      const script = loadScript(name);
      const header = /^--\[\[([\s\S]*?)\]\]/.exec(raw)![1];
      const keyLines = header.match(/^\s*KEYS\[\d+\]/gm) ?? [];
      expect(script.numberOfKeys).toBe(keyLines.length);
      expect(script.command).toBe(`sluice_${name.replace(/-/g, '_')}`);
      expect(script.source).not.toMatch(/^-- @include/m);
      if (/^-- @include common/m.test(raw)) expect(script.source).toContain('local function nowMs()');
    });

    it('loads on the real server (SCRIPT LOAD)', async () => {
      const { source } = loadScript(name);
      const sha = await redis.script('LOAD', source);
      expect(sha).toBe(createHash('sha1').update(source).digest('hex'));
      expect(await redis.script('EXISTS', sha as string)).toEqual([1]);
    });
  });

  it('a header without Reply is rejected by the loader', () => {
    // Guards the loader's own check: point it at the includes directory, whose file has no header.
    expect(() => loadScript('common', join(LUA_DIR, 'includes'))).toThrow(/header/);
  });

  it('registers every script as an ioredis command and runs one through EVALSHA/EVAL', async () => {
    const scripts = scriptsOn(redis);
    for (const name of ALL) {
      expect(typeof (redis as unknown as Record<string, unknown>)[`sluice_${name.replace(/-/g, '_')}`]).toBe('function');
    }
    // declare-limits on a throwaway hash and set: an observable effect proves the script really ran.
    const base = `{sluice:lua-${Date.now()}}:`;
    const key = `${base}limits`;
    const workflows = `${base}workflows`;
    const seq = `${base}seq`;
    try {
      const declare = [base, 1, 'a', 'wf:a', '3', 'a', ''];
      const changed = await scripts.run<string[]>('declare-limits', [key, workflows, seq], declare);
      expect(changed).toEqual(['wf:a', '', '3']);
      expect(await redis.hget(key, 'wf:a')).toBe('3');
      expect(await redis.smembers(workflows)).toEqual(['a']);
      expect(await scripts.run<string[]>('declare-limits', [key, workflows, seq], declare)).toEqual([]);
      expect(() => scripts.run('declare-limits', [key], [])).toThrow(/keys/);
    } finally {
      await redis.del(key, workflows, seq);
    }
  });
});
