import { Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Cluster, Redis } from 'ioredis';
import { loadScript, LUA_DIR, scriptNames, SLOT_GUARD_KEYS } from '../../lib/redis/lua.scripts';
import { LayoutRefusedError } from '../../lib/redis/layout.gate';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { rawRedis } from '../support/app';
import { rejection } from '../support/rejection';
import { includesUsed, luaIncludeIndex, withNeeds } from '../support/lua-references';
import { isCluster, serverNodes } from '../support/nodes';
import { scriptsOn } from '../support/scripts';

/** The scripts the worker and client need; new ones are covered too through scriptNames(). */
const CORE = ['complete', 'declare-limits', 'enqueue', 'extend-leases', 'fail', 'release', 'reserve', 'save-steps'];
const ALL = scriptNames();
/** Script flags other than the default (test/e2e/script-flags.spec.ts checks what they do when Redis is out of memory). */
const FLAGS: Record<string, string> = {
  'acl-check': 'no-writes',
  'batch-members': 'no-writes',
  'list-runs': 'allow-oom',
  'schedule-list': 'no-writes',
  stats: 'allow-oom',
  remove: 'allow-oom',
  cancel: 'allow-oom',
};
/** The write commands the scripts use. */
const INCLUDES = luaIncludeIndex(LUA_DIR);
const WRITE_COMMANDS = new Set([
  'SET',
  'HSET',
  'HDEL',
  'DEL',
  'LPUSH',
  'RPUSH',
  'LPOP',
  'RPOP',
  'LREM',
  'LTRIM',
  'ZADD',
  'ZREM',
  'ZPOPMIN',
  'ZREMRANGEBYSCORE',
  'ZREMRANGEBYRANK',
  'ZINCRBY',
  'SADD',
  'SREM',
  'INCR',
  'INCRBY',
  'HINCRBY',
  'HSETNX',
  'PEXPIRE',
  'EXPIRE',
  'PERSIST',
  'PUBLISH',
  'SPUBLISH',
  'LMOVE',
  'RPOPLPUSH',
]);

describe('lua scripts', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = rawRedis();
  });
  afterAll(() => redis.quit());

  it('finds every script file in lua/ (and not the includes)', () => {
    expect(ALL).toEqual(expect.arrayContaining(CORE));
    expect(ALL).not.toContain('lanes');
    expect([...ALL].sort()).toEqual(ALL);
  });

  describe.each(ALL)('%s.lua', (name) => {
    const raw = readFileSync(join(LUA_DIR, `${name}.lua`), 'utf8');

    it('starts with #!lua and a header listing KEYS, ARGV and the Reply', () => {
      const header = /^#!lua[^\n]*\n--\[\[([\s\S]*?)\]\]/.exec(raw)?.[1];
      expect(header).toBeDefined();
      expect(header).toMatch(/^\s*KEYS\[1\]\s+\S/m);
      expect(header).toMatch(/^\s*ARGV\[1(\.\.)?\]/m);
      expect(header).toMatch(/^\s*Reply:\s*\S/m);
    });

    it('takes its key count from the header, the slot guard last, and inlines its includes', () => {
      const script = loadScript(name);
      const header = /^#!lua[^\n]*\n--\[\[([\s\S]*?)\]\]/.exec(raw)![1];
      const keyLines = header.match(/^\s*KEYS\[\d+\]/gm) ?? [];
      // One line per key of its own, then one line naming the two slot-guard keys.
      expect(script.numberOfKeys).toBe(keyLines.length - 1 + SLOT_GUARD_KEYS);
      expect(header).toMatch(new RegExp(`^\\s*KEYS\\[${script.numberOfKeys - 1}\\], KEYS\\[${script.numberOfKeys}\\] the slot guard`, 'm'));
      expect(script.command).toBe(`sluice_${name.replace(/-/g, '_')}`);
      expect(script.source).not.toMatch(/^-- @include/m);
      if (/^-- @include time$/m.test(raw)) expect(script.source).toContain('local function nowMs()');
    });

    it('includes every include it uses, with what they need, and no other; its header lists them', () => {
      const { includes } = loadScript(name);
      const own = raw.replace(/^#!lua[^\n]*\n--\[\[[\s\S]*?\]\]/, '');
      expect(new Set(includes)).toEqual(withNeeds(INCLUDES, includesUsed(INCLUDES, own)));
      const listed = /^\s*Includes:([\s\S]*?)\n\s*(?:\n|KEYS\[)/m
        .exec(raw)?.[1]
        .split(/[\s,]+/)
        .filter(Boolean);
      expect(listed).toEqual(includes.length > 0 ? includes : ['none']);
    });

    it('never touches the slot guard, and builds every key it reaches inside the namespace', () => {
      const { numberOfKeys } = loadScript(name);
      const source = loadScript(name)
        .source.replace(/--\[\[[\s\S]*?\]\]/g, '')
        .replace(/--.*$/gm, '');
      const guard = new RegExp(`KEYS\\[(${numberOfKeys - 1}|${numberOfKeys})\\]`);
      expect(source).not.toMatch(guard);
      // A key argument is KEYS[n] or built from the base; a literal hash tag would name another slot.
      const keyArguments = [...source.matchAll(/redis\.p?call\(\s*'[A-Za-z]+'\s*,\s*([^,)]+)/g)].map((m) => m[1].trim());
      expect(keyArguments.filter((argument) => /['"]\{/.test(argument))).toEqual([]);
    });

    it('carries the script flags it needs (no-writes for readers, allow-oom for what frees memory)', () => {
      expect(raw.split('\n', 1)[0]).toBe(FLAGS[name] ? `#!lua flags=${FLAGS[name]}` : '#!lua');
      if (FLAGS[name] === 'no-writes') {
        // Its own code sends no write (the helpers it includes and calls are checked on Redis: a write would fail there).
        const own = raw.replace(/--\[\[[\s\S]*?\]\]/g, '').replace(/--.*$/gm, '');
        const commands = [...own.matchAll(/redis\.p?call\(\s*'([A-Za-z]+)'/g)].map((m) => m[1].toUpperCase());
        expect(commands.filter((command) => WRITE_COMMANDS.has(command))).toEqual([]);
      }
    });

    it('loads on the real server (SCRIPT LOAD)', async () => {
      const { source } = loadScript(name);
      for (const node of await serverNodes(redis)) {
        const sha = await node.script('LOAD', source);
        expect(sha).toBe(createHash('sha1').update(source).digest('hex'));
        expect(await node.script('EXISTS', sha as string)).toEqual([1]);
      }
    });
  });

  describe.each([...INCLUDES.text.keys()])('includes/%s.lua', (name) => {
    const text = INCLUDES.text.get(name)!;

    it('holds one concern: at most 200 lines, opening with its name', () => {
      expect(text.split('\n').length - 1).toBeLessThanOrEqual(200);
      expect(text.split('\n', 1)[0]).toMatch(new RegExp(`^-- ${name}: \\S`));
    });

    it('declares with @needs exactly the includes it uses', () => {
      expect([...INCLUDES.needs.get(name)!].sort()).toEqual([...includesUsed(INCLUDES, text, name)].sort());
    });
  });

  it('a header without Reply is rejected by the loader', () => {
    // Guards the loader's own check: point it at the includes directory, whose files have no header.
    expect(() => loadScript('lanes', join(LUA_DIR, 'includes'))).toThrow(/header/);
  });

  it("refuses a script whose header's includes differ from its @include lines, or that leaves out what an include needs", () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-lua-'));
    try {
      cpSync(LUA_DIR, dir, { recursive: true });
      const park = join(dir, 'park.lua');
      const original = readFileSync(park, 'utf8');
      writeFileSync(park, original.replace('Includes: time, util, wakes', 'Includes: time, wakes'));
      expect(() => loadScript('park', dir)).toThrow(
        /park\.lua: its header must list its includes, in order \(Includes: time, util, wakes\)/,
      );
      writeFileSync(park, original.replace('Includes: time, util, wakes', 'Includes: util, wakes').replace('-- @include time\n', ''));
      expect(() => loadScript('park', dir)).toThrow(/park\.lua: includes\/wakes\.lua needs time, to be included before it/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('at-layout variants run only at a layout the caller allows, with the plain arguments, and refuse before any write at another', async () => {
    const ns = `gate-${Date.now()}`;
    const keys = new RedisKeys('sluice', ns);
    const scripts = scriptsOn(redis, ns);
    const gated = scripts.atLayout({ marker: keys.schema, lowest: 3, highest: 4 });
    const declare = (limit: string) =>
      gated.run<string[]>('declare-limits', [keys.limits, keys.workflows, keys.seq], [keys.base, 1, 'a', 'wf:a', limit, 'a', '']);
    const before = await redis.info('errorstats');
    const refusals = (info: string) => Number(/errorstat_SLUICE_LAYOUT:count=(\d+)/.exec(info)?.[1] ?? 0);
    try {
      for (const found of [undefined, '2', '5', 'two']) {
        if (found === undefined) await redis.del(keys.schema);
        else await redis.set(keys.schema, found);
        const error = await rejection(() => declare('3'));
        expect(error).toBeInstanceOf(LayoutRefusedError);
        expect(error).toMatchObject({ script: 'declare-limits', found: found ?? 'none' });
        expect(await redis.exists(keys.limits, keys.workflows, keys.seq)).toBe(0);
      }
      // Each refusal is an error Redis counts; the count is the server's, which specs running
      // beside this one on the shared server (a migration's, a boot's at another layout) add to.
      if (!isCluster(redis)) expect(refusals(await redis.info('errorstats')) - refusals(before)).toBeGreaterThanOrEqual(4);
      await redis.set(keys.schema, '3');
      expect(await declare('3')).toEqual(['wf:a', '', '3', '', '3']); // field, previous, new, outcome (the code's), declared
      await redis.set(keys.schema, '4');
      expect(await declare('4')).toEqual(['wf:a', '3', '4', '', '4']);
      expect(await redis.hget(keys.limits, 'wf:a')).toBe('4');
      expect(await redis.smembers(keys.workflows)).toEqual(['a']);
      // The plain variant, as ever, whatever the layout.
      await redis.set(keys.schema, '2');
      expect(
        await scripts.run('declare-limits', [keys.limits, keys.workflows, keys.seq], [keys.base, 1, 'a', 'wf:a', '5', 'a', '']),
      ).toEqual(['wf:a', '4', '5', '', '5']);
      expect(() => gated.run('complete', [], [])).toThrow(/keys|no at-layout variant/);
    } finally {
      await redis.del(keys.schema, keys.limits, keys.workflows, keys.seq);
    }
  });

  it('declares the slot guard on a cluster only: a single server has no slot to migrate, and each key sent costs it', async () => {
    const ns = `guard-${Date.now()}`;
    const keys = new RedisKeys('sluice', ns);
    const send = jest.spyOn(redis, 'sendCommand');
    try {
      await scriptsOn(redis, ns).run('declare-limits', [keys.limits, keys.workflows, keys.seq], [keys.base, 1, 'a', 'wf:a', '3', 'a', '']);
      const fcall = send.mock.calls.map(([command]) => command).find((command) => command.name === 'fcall')!;
      const [, numberOfKeys, ...rest] = fcall.args.map(String);
      const declared = rest.slice(0, Number(numberOfKeys));
      const guard = keys.slotGuard(true);
      expect(declared).toEqual([keys.limits, keys.workflows, keys.seq, ...(isCluster(redis) ? guard : [])]);
      expect(rest.slice(Number(numberOfKeys))).toEqual([keys.base, '1', 'a', 'wf:a', '3', 'a', '']);
      expect(await redis.hget(keys.limits, 'wf:a')).toBe('3');
    } finally {
      send.mockRestore();
      await redis.del(keys.limits, keys.workflows, keys.seq);
    }
  });

  it('registers every script as an ioredis command only once the EVALSHA path is taken (functions refused), and runs one there', async () => {
    const defined = (connection: Redis) =>
      ALL.filter((name) => typeof (connection as unknown as Record<string, unknown>)[`sluice_${name.replace(/-/g, '_')}`] === 'function');
    // Through the library (FCALL) nothing is defined: a definition hashes the script's whole source, on every new connection.
    const library = scriptsOn(redis);
    // A connection of an ACL user without FCALL: the scripts fall back to EVALSHA.
    const user = `sluice-no-fcall-${Date.now()}`;
    const nodes = await serverNodes(redis);
    for (const node of nodes) await node.call('ACL', 'SETUSER', user, 'on', '>secret', '~*', '&*', '+@all', '-fcall', '-fcall_ro');
    const credentials = { username: user, password: 'secret' };
    const raw = redis as Redis | Cluster;
    const refusing = isCluster(raw) ? (raw.duplicate([], { redisOptions: credentials }) as unknown as Redis) : raw.duplicate(credentials);
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    // declare-limits on a throwaway hash and set: an observable effect proves the script really ran.
    const base = `{sluice:lua-${Date.now()}}:`;
    const key = `${base}limits`;
    const workflows = `${base}workflows`;
    const seq = `${base}seq`;
    try {
      const declare = [base, 1, 'a', 'wf:a', '3', 'a', ''];
      const changed = await library.run<string[]>('declare-limits', [key, workflows, seq], declare);
      expect(changed).toEqual(['wf:a', '', '3', '', '3']); // field, previous, new, outcome (the code's), declared
      expect(defined(redis)).toEqual([]);
      expect(await redis.hget(key, 'wf:a')).toBe('3');
      expect(await redis.smembers(workflows)).toEqual(['a']);
      expect(() => library.run('declare-limits', [key], [])).toThrow(/keys/);

      const evalsha = scriptsOn(refusing);
      expect(defined(refusing)).toEqual([]);
      expect(await evalsha.run<string[]>('declare-limits', [key, workflows, seq], declare)).toEqual([]);
      expect(defined(refusing)).toEqual(ALL);
      const raised = [base, 1, 'a', 'wf:a', '4', 'a', ''];
      expect(await evalsha.run<string[]>('declare-limits', [key, workflows, seq], raised)).toEqual(['wf:a', '3', '4', '', '4']);
      expect(await redis.hget(key, 'wf:a')).toBe('4');
      // No at-layout variants on this path: a call refused FCALL is not sent through EVALSHA (the
      // boot then waits for the layout's read). A new instance: it learns of the refusal then.
      const gate = { marker: `${base}schema`, lowest: 0, highest: 99 };
      await redis.set(gate.marker, '3');
      const fresh = scriptsOn(refusing, base.slice('{sluice:'.length, -2));
      for (const scripts of [fresh, fresh]) {
        const refused = await rejection(() =>
          scripts.atLayout(gate).run('declare-limits', [key, workflows, seq], [base, 1, 'a', 'wf:a', '9', 'a', '']),
        );
        expect(refused).toBeInstanceOf(LayoutRefusedError);
        expect(refused).toMatchObject({ found: undefined });
      }
      expect(await redis.hget(key, 'wf:a')).toBe('4');
      expect(warn.mock.calls.map(([message]) => String(message))).toEqual([
        expect.stringMatching(/^Redis refused FCALL \(NOPERM.*\): the scripts run through EVALSHA instead/),
        expect.stringMatching(/^Redis refused FCALL \(NOPERM.*\): the scripts run through EVALSHA instead/), // the fresh instance's
      ]);
    } finally {
      warn.mockRestore();
      refusing.disconnect();
      for (const node of nodes) await node.call('ACL', 'DELUSER', user);
      await redis.del(key, workflows, seq, `${base}schema`);
    }
  });
});
