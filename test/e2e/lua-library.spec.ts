import 'reflect-metadata';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Test } from '@nestjs/testing';
import Redis from 'ioredis';
import { QueueClient, QueueModule, type QueueModuleOptions, Workflow } from '../../lib';
import { buildLibrary, luaLibrary } from '../../lib/redis/lua.library';
import { LUA_DIR, loadScript, scriptNames } from '../../lib/redis/lua.source';
import { uniqueNamespace } from '../support/app';
import { LogCapture } from '../support/log-capture';
import { LocalRedis, startRedisServer } from '../support/redis-server';

@Workflow('library.echo')
class EchoWorkflow {
  async run(input: { n: number }): Promise<number> {
    return input.n;
  }
}

/** A copy of lua/ to change, and the library built from it. */
function withLuaCopy(change: (dir: string) => void): () => ReturnType<typeof buildLibrary> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-lua-'));
  cpSync(LUA_DIR, dir, { recursive: true });
  change(dir);
  return () => {
    try {
      return buildLibrary(
        scriptNames(dir).map((name) => loadScript(name, dir)),
        dir,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

function edit(file: string, replace: (text: string) => string): void {
  writeFileSync(file, replace(readFileSync(file, 'utf8')));
}

describe('the Lua function library', () => {
  describe('as built from lua/', () => {
    const library = luaLibrary();
    /** A script's registration, from `do local body` to its `end } end`. */
    const callback = (script: string) => {
      const start = library.code.indexOf(`do local body = bodies['${script}']\n`);
      expect(start).toBeGreaterThanOrEqual(0);
      return library.code.slice(start, library.code.indexOf('\nend } end', start));
    };

    it('registers every script under a name carrying the hash of the code, with its flags', () => {
      expect(library.name).toMatch(/^sluice_[0-9a-f]{16}$/);
      expect(library.code.split('\n', 1)[0]).toBe(`#!lua name=${library.name}`);
      for (const name of scriptNames()) {
        const { flags } = loadScript(name);
        expect(library.functionName(name as never)).toBe(`${library.name}_${name.replace(/-/g, '_')}`);
        const registration = library.code
          .split('\n')
          .find((line) => line.startsWith(`redis.register_function{ function_name = '${library.functionName(name as never)}',`));
        expect(registration).toBeDefined();
        expect(registration).toContain(`flags = { ${flags.map((flag) => `'${flag}'`).join(', ')} }`);
        expect(callback(name)).toMatch(new RegExp(`^do local body = bodies\\['${name}'\\]\\n`));
      }
    });

    it("declares the includes' per-call state bare and sets it again at the start of each call; constants stay", () => {
      // State that starts as empty tables is made at load, and emptied at a call's start only if a
      // call wrote to its include's tables since (the include's flag says so).
      expect(library.code).toMatch(/^local limitCache = \{\}$/m);
      expect(library.code).toMatch(/^local limitsDirty = false$/m);
      expect(library.code).toMatch(/^local pendingAdds, pendingRemovals, pendingDelta = \{\}, \{\}, \{\}$/m);
      expect(library.code).toMatch(/^local KEYS_LEASES$/m);
      expect(library.code).toMatch(/^local turnNext, turnLast$/m);
      // Each function resets its includes' state inline, under a comment naming the include.
      const reset = (include: string, script = 'complete') =>
        new RegExp(`-- resets ${include}\\n([\\s\\S]*?)\\n(?:-- resets|return body\\(\\))`).exec(callback(script))?.[1];
      expect(reset('limits')).toContain(
        'if limitsDirty then limitsDirty = false if next(limitCache) ~= nil then local n = 0 for k in next, limitCache do limitCache[k] = nil n = n + 1 end if n > 32 then limitCache = {} end end end',
      );
      expect(reset('leases')).toContain(
        'if next(pendingRemovals) ~= nil then local n = 0 for k in next, pendingRemovals do pendingRemovals[k] = nil n = n + 1 end if n > 32 then pendingRemovals = {} end end',
      );
      expect(reset('leases')).toMatch(/^if leasesDirty then leasesDirty = false if next\(activeCache\)/m);
      expect(reset('leases')).toContain("KEYS_LEASES = ARGV[1] .. 'leases'");
      expect(reset('groups')).toContain('turnNext, turnLast = 1, 0');
      expect(reset('time')).toContain('callNow = nil');
      // An include's name with a hyphen makes a Lua name all the same.
      expect(reset('claim-pass')).toBe(
        'if claimPassDirty then claimPassDirty = false if next(rings) ~= nil then local n = 0 for k in next, rings do rings[k] = nil n = n + 1 end if n > 32 then rings = {} end end end',
      );
      // An include without per-call state has nothing to reset.
      expect(library.code).not.toContain('-- resets util');
      expect(library.code).toMatch(/^local MAX_PRIORITY = 1048575$/m);
      expect(library.code).not.toMatch(/^MAX_PRIORITY = /m);
      // Set once at load by waits.lua, so not reset per call.
      expect(library.code).toMatch(/^local onChildFinished$/m);
      expect(library.code).not.toMatch(/^onChildFinished = nil$/m);
      // A script resets only the state of the includes it names.
      const resets = (script: string) => [...callback(script).matchAll(/^-- resets (\S+)$/gm)].map((match) => match[1]);
      expect(resets('park')).toEqual(['time', 'wakes']);
      expect(resets('complete')).toEqual([
        'time',
        'lanes',
        'wakes',
        'limits',
        'leases',
        'rates',
        'groups',
        'records',
        'slots',
        'finish',
        'claim',
        'claim-pass',
      ]);
      expect(resets('watch')).toEqual([]);
    });

    it('gets another name when any script changes, so two versions stand side by side on one server', () => {
      const changed = withLuaCopy((dir) => edit(join(dir, 'watch.lua'), (text) => `${text}\n-- changed\n`))();
      expect(changed.name).not.toBe(library.name);
      expect(withLuaCopy(() => undefined)().name).toBe(library.name);
    });

    it('refuses per-call state whose initial value spans lines, and includes out of order', () => {
      const spanning = withLuaCopy((dir) => edit(join(dir, 'includes', 'claim.lua'), (text) => `${text}\nlocal pending = {\n  1 }\n`));
      expect(spanning).toThrow(/claim\.lua: per-call state `pending` must get its initial value on one line/);
      // A per-call table needs its include's flag, and every write to it sets the flag.
      const unflagged = withLuaCopy((dir) => edit(join(dir, 'includes', 'claim.lua'), (text) => `${text}\nlocal pending = {}\n`));
      expect(unflagged).toThrow(/claim\.lua: per-call tables \(pending\) need their flag: local claimDirty = false/);
      const silentWrite = withLuaCopy((dir) =>
        edit(join(dir, 'includes', 'wakes.lua'), (text) =>
          text.replace('markedWakeLists[wakeKey], wakesDirty = true, true', 'markedWakeLists[wakeKey] = true'),
        ),
      );
      expect(silentWrite).toThrow(
        /includes\/wakes\.lua: `markedWakeLists\[wakeKey\] = true` writes to the per-call table markedWakeLists, so it must set wakesDirty = true/,
      );
      const reordered = withLuaCopy((dir) =>
        edit(join(dir, 'stats.lua'), (text) =>
          text
            .replace('-- @include limits\n-- @include leases', '-- @include leases\n-- @include limits')
            .replace('limits, leases,', 'leases, limits,'),
        ),
      );
      expect(reordered).toThrow(/stats\.lua: includes time, util, lanes, wakes, leases, limits/);
    });

    it('refuses an include that needs one INCLUDE_ORDER puts after it', () => {
      // No scripts: their own check (lua.source.ts) would refuse them first.
      const dir = mkdtempSync(join(tmpdir(), 'sluice-lua-'));
      cpSync(LUA_DIR, dir, { recursive: true });
      edit(join(dir, 'includes', 'util.lua'), (text) => text.replace('\n--\n', '\n-- @needs time, lanes\n--\n'));
      const later = () => {
        try {
          return buildLibrary([], dir);
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      };
      expect(later).toThrow(/lua\/includes\/util\.lua needs lanes, which INCLUDE_ORDER must put before it/);
    });
  });

  describe('on a server of its own', () => {
    let server: LocalRedis;
    let admin: Redis;

    beforeAll(async () => {
      server = await startRedisServer();
      admin = new Redis(server.url);
    });
    afterAll(async () => {
      admin?.disconnect();
      await server?.stop();
    });
    beforeEach(async () => {
      await admin.function('FLUSH');
      await admin.config('RESETSTAT');
    });

    async function start(options: Partial<QueueModuleOptions> = {}, logs?: LogCapture) {
      const app = await Test.createTestingModule({
        imports: [QueueModule.forRoot({ connection: { url: server.url }, namespace: uniqueNamespace('library'), ...options })],
        providers: [EchoWorkflow],
      }).compile();
      app.useLogger(logs ?? false);
      await app.init();
      return { client: app.get(QueueClient), close: () => app.close() };
    }

    async function calls(command: string): Promise<number> {
      const stats = await admin.info('commandstats');
      return Number(new RegExp(`^cmdstat_${command.replace('|', '\\|')}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0);
    }

    it('gives every call empty per-call tables: emptied in place, replaced only after a large one', async () => {
      const probed = withLuaCopy((dir) => {
        edit(join(dir, 'includes', 'time.lua'), (text) => `${text}\nlocal timeDirty = false\nlocal probeSeen = {}\n`);
        edit(join(dir, 'park.lua'), (text) =>
          text.replace(
            '-- @include wakes\n',
            "-- @include wakes\nif ARGV[1] == 'probe' then local seen = 0 for _ in pairs(probeSeen) do seen = seen + 1 end " +
              "local identity = tostring(probeSeen) for i = 1, tonumber(ARGV[2]) do probeSeen['k' .. i], timeDirty = i, true end return { seen, identity } end\n",
          ),
        );
      })();
      await admin.call('FUNCTION', 'LOAD', probed.code);
      const probe = async (fill: number) =>
        (await admin.call('FCALL', probed.functionName('park'), 3, 'a', 'b', 'c', 'probe', fill)) as [number, string];
      // Each call left entries: the next one starts from an empty table all the same.
      const calls = [await probe(3), await probe(5), await probe(40), await probe(2), await probe(0)];
      expect(calls.map(([seen]) => seen)).toEqual([0, 0, 0, 0, 0]);
      // The same table while the calls leave a few entries (no garbage per call); a new one after 40.
      const [first, second, third, fourth, fifth] = calls.map(([, identity]) => identity);
      expect([second, third]).toEqual([first, first]);
      expect(fourth).not.toBe(first);
      expect(fifth).toBe(fourth);
    });

    it('is loaded by the first call, every call starts from fresh state, and a FUNCTION FLUSH is recovered from', async () => {
      const app = await start();
      try {
        expect(await app.client.run(EchoWorkflow, { n: 1 })).toBe(1);
        const libraries = (await admin.function('LIST')) as unknown[][];
        expect(libraries.map((entry) => entry[1])).toEqual([luaLibrary().name]);
        expect(await calls('evalsha')).toBe(0);

        // The clock is read once per call (time.lua's nowMs): state kept from one call to the
        // next would give both runs the first one's creation time.
        const first = await app.client.enqueue(EchoWorkflow, { n: 2 }, { delayMs: 60_000 });
        const firstCreated = (await app.client.get(first.id))!.createdAt.getTime();
        while (Date.now() <= firstCreated + 2) await new Promise((resolve) => setImmediate(resolve));
        const second = await app.client.enqueue(EchoWorkflow, { n: 3 }, { delayMs: 60_000 });
        expect((await app.client.get(second.id))!.createdAt.getTime()).toBeGreaterThan(firstCreated);

        await admin.function('FLUSH');
        expect(await app.client.run(EchoWorkflow, { n: 4 })).toBe(4);
        expect(((await admin.function('LIST')) as unknown[][]).map((entry) => entry[1])).toEqual([luaLibrary().name]);
        expect(await calls('evalsha')).toBe(0);
      } finally {
        await app.close();
      }
    });

    it('runs the scripts through EVALSHA for a user that may not use functions, and says so once', async () => {
      await admin.acl('SETUSER', 'nofunctions', 'on', 'nopass', '~*', '&*', '+@all', '-function', '-fcall', '-fcall_ro');
      const logs = new LogCapture();
      const app = await start({ connection: { url: server.url.replace('redis://', 'redis://nofunctions:any@') } }, logs);
      try {
        expect(await app.client.run(EchoWorkflow, { n: 5 })).toBe(5);
        expect(await Promise.all([1, 2, 3].map((n) => app.client.run(EchoWorkflow, { n })))).toEqual([1, 2, 3]);
        expect(await calls('evalsha')).toBeGreaterThan(0);
        expect(await admin.function('LIST')).toEqual([]);
        expect(logs.find('warn', /^Redis refused FCALL \(NOPERM.*'fcall'.*\): the scripts run through EVALSHA instead/)).toHaveLength(1);
      } finally {
        await app.close();
        await admin.acl('DELUSER', 'nofunctions');
      }
    });

    it('with memory full and the library gone (a restart), the scripts flagged allow-oom still answer (through EVAL), and it loads again once there is room', async () => {
      const app = await start({ worker: { enabled: false } });
      try {
        await admin.function('FLUSH');
        await admin.config('SET', 'maxmemory', '1');
        try {
          expect((await app.client.stats({ workflow: EchoWorkflow })).workflows['library.echo']).toMatchObject({ waiting: 0 });
          expect(await admin.function('LIST')).toEqual([]);
        } finally {
          await admin.config('SET', 'maxmemory', '0');
        }
        const handle = await app.client.enqueue(EchoWorkflow, { n: 6 });
        expect(await app.client.get(handle.id)).toMatchObject({ state: 'waiting' });
        expect(((await admin.function('LIST')) as unknown[][]).map((entry) => entry[1])).toEqual([luaLibrary().name]);
      } finally {
        await app.close();
      }
    });
  });
});
