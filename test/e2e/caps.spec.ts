import { Inject } from '@nestjs/common';
import type Redis from 'ioredis';
import { setTimeout as delay } from 'node:timers/promises';
import { InvalidInputError, InvalidNameError, InvalidOptionError, MAX_LIMIT, RunContext, Workflow } from '../../lib';
import { RedisConnections } from '../../lib/redis/redis.connections';
import { dropNamespace, rawRedis, uniqueNamespace } from '../support/app';
import { CapturingLogger, cardinalities, completions, FlowApp, flowKeys, LiveGauge, sample, startFlowApp, within } from '../support/flow';
import { Gates, pollUntil } from '../support/workflows';
import type { ErrorClass } from '../support/error-class';

/**
 * Fleet-wide caps live in Redis: written by each worker bootstrap from its code (the latest
 * wins, and says so), changed at runtime with setLimits, read by the Lua scripts on every claim.
 * Every app here runs in this jest process, so LiveGauge sees every executing run of the fleet.
 */
const APP = 'APP';
const live = new LiveGauge();
const byApp = new Map<string, number>();
const gates = new Gates();
const begun = new Gates();

interface Input {
  i: number;
  ms?: number;
  flaky?: boolean;
}
async function work(app: string, input: Input, ctx: RunContext): Promise<number> {
  live.enter('shared');
  byApp.set(app, (byApp.get(app) ?? 0) + 1);
  try {
    await delay(input.ms ?? 1 + (input.i % 3)); // the work itself
    // A failed attempt frees its slot without refilling it, so both apps contend for slots.
    if (input.flaky && ctx.attempt === 1) throw new Error('first attempt fails');
  } finally {
    live.leave('shared');
  }
  return input.i;
}

// One workflow name, two declarations: as two versions of a service deployed side by side.
@Workflow('caps.shared', { concurrency: 10, attempts: 2, backoff: { delayMs: 0 } })
class LooseShared {
  constructor(@Inject(APP) private readonly app: string) {}
  run(input: Input, ctx: RunContext) {
    return work(this.app, input, ctx);
  }
}

@Workflow('caps.shared', { concurrency: 3, attempts: 2, backoff: { delayMs: 0 } })
class TightShared {
  constructor(@Inject(APP) private readonly app: string) {}
  run(input: Input, ctx: RunContext) {
    return work(this.app, input, ctx);
  }
}

async function held(key: string): Promise<string> {
  begun.open(key);
  await gates.get(key).promise;
  return key;
}
@Workflow('caps.grp', { groupConcurrency: 1 })
class GroupOfOne {
  run(input: { key: string }) {
    return held(input.key);
  }
}
@Workflow('caps.grp', { groupConcurrency: 3 })
class GroupOfThree {
  run(input: { key: string }) {
    return held(input.key);
  }
}

async function nsWork(_input: { wf: string }): Promise<void> {
  live.enter('ns');
  try {
    await delay(2);
  } finally {
    live.leave('ns');
  }
}
@Workflow('nscap.a')
class NsA {
  run(input: { wf: string }) {
    return nsWork(input);
  }
}
@Workflow('nscap.b')
class NsB {
  run(input: { wf: string }) {
    return nsWork(input);
  }
}

let redis: Redis;
let apps: FlowApp[] = [];
const namespaces: string[] = [];
const logger = new CapturingLogger();

function space() {
  const ns = uniqueNamespace('caps');
  namespaces.push(ns);
  return { ns, k: flowKeys(ns) };
}
async function start(...args: Parameters<typeof startFlowApp>): Promise<FlowApp> {
  const app = await startFlowApp(...args);
  apps.push(app);
  return app;
}

beforeAll(() => void (redis = rawRedis()));
afterAll(async () => {
  gates.openAll();
  await Promise.all(apps.map((app) => app.close()));
  apps = [];
  for (const ns of namespaces) await dropNamespace(redis, ns);
  await redis.quit();
});

describe('a workflow cap declared differently by two apps', () => {
  const { ns, k } = space();
  const RUNS = 1_000;
  let a: FlowApp;
  let b: FlowApp;

  it('is the one stored by the later bootstrap, which logs the change; no drain exceeds it', async () => {
    a = await start([LooseShared, { provide: APP, useValue: 'a' }], { namespace: ns, worker: { concurrency: 10 } }, logger);
    const linesA = logger.lines.splice(0);
    b = await start([TightShared, { provide: APP, useValue: 'b' }], { namespace: ns, worker: { concurrency: 10 } }, logger);
    const linesB = logger.lines.splice(0);
    expect(linesA).toContainEqual(expect.stringContaining('Fleet-wide cap wf:caps.shared changed from none to 10'));
    expect(linesB).toContainEqual(expect.stringContaining('Fleet-wide cap wf:caps.shared changed from 10 to 3'));
    expect(linesB.filter((line) => line.includes('changed'))).toHaveLength(1);
    for (const app of [a, b])
      expect(await app.client.getLimits({ workflow: 'caps.shared' })).toEqual({
        namespace: null,
        workflow: 3,
        groupDefault: null,
        rateLimit: null,
        groupRateLimit: null,
      });

    const sampler = sample(async () => (await a.client.stats({ workflow: 'caps.shared' })).workflows['caps.shared'].active);
    const drained = completions([a, b], RUNS);
    // Enqueued through the app whose own declaration says 10.
    await a.client.enqueueMany(
      LooseShared,
      Array.from({ length: RUNS }, (_, i) => ({ input: { i, flaky: i % 4 === 0 } })),
    );
    await within(drained, 30_000, `${RUNS} runs to complete`);
    const active = await sampler.stop();

    expect(Math.max(...active)).toBe(3); // never above the stored cap, and the cap was reached
    expect(live.max('shared')).toBe(3);
    expect(active.length).toBeGreaterThan(20);
    expect(byApp.get('a')).toBeGreaterThan(0); // the loosely configured app took part, within the cap
    expect(byApp.get('b')).toBeGreaterThan(0);
    const stats = await b.client.stats({ workflow: 'caps.shared' });
    expect(stats.workflows['caps.shared']).toMatchObject({ active: 0, waiting: 0, delayed: 0, limit: 3, completed: RUNS, failed: 0 });
  });

  it('setLimits at runtime holds for runs claimed after it: lowered 3 → 1, then raised to 5', async () => {
    const RUNS2 = 400;
    const readActive = () => redis.scard(k.active('caps.shared'));
    const drained = completions([a, b], RUNS2);
    await a.client.enqueueMany(
      LooseShared,
      Array.from({ length: RUNS2 }, (_, i) => ({ input: { i, ms: 4 } })),
    );
    await pollUntil(readActive, (n) => n === 3, 'the stored cap of 3 to be reached');

    expect(await b.client.setLimits({ workflow: 'caps.shared', limit: 1 })).toBe(3);
    expect(await a.client.getLimits({ workflow: 'caps.shared' })).toMatchObject({ workflow: 1 });
    // Read after the change: a superset of the runs that were active when it happened.
    const atChange = await redis.smembers(k.active('caps.shared'));
    await pollUntil(
      () => redis.smismember(k.active('caps.shared'), ...atChange),
      (flags) => flags.every((f) => f === 0),
      'the runs active at the change to finish',
    );
    live.resetMax('shared');
    const lowered = sample(readActive);
    await within(completions([a, b], 40), 10_000, '40 runs under the lowered cap');
    const low = await lowered.stop();
    expect(Math.max(...low)).toBe(1);
    expect(live.max('shared')).toBe(1);
    expect(low.length).toBeGreaterThan(10);

    expect(await a.client.setLimits({ workflow: 'caps.shared', limit: 5 })).toBe(1);
    live.resetMax('shared');
    const raised = sample(readActive);
    await pollUntil(
      async () => Math.max(0, ...raised.samples),
      (max) => max >= 5,
      'the raised cap to be used',
    );
    await within(drained, 30_000, `${RUNS2} runs to complete`);
    expect(Math.max(...(await raised.stop()))).toBe(5);
    expect(live.max('shared')).toBeLessThanOrEqual(5);
    expect(await readActive()).toBe(0);
  });
});

describe('setLimits / getLimits input', () => {
  it('rejects bad targets and limits with typed errors, before any Redis call', async () => {
    const { ns, k } = space();
    const producer = await start([LooseShared, { provide: APP, useValue: 'p' }], { namespace: ns, worker: { enabled: false } });
    const command = producer.app.get(RedisConnections).command;
    const spy = jest.spyOn(command.client, 'sendCommand');
    const { client } = producer;
    const wf = 'caps.shared';
    const cases: Array<[string, () => Promise<unknown>, ErrorClass, RegExp]> = [
      ['workflow with a space', () => client.setLimits({ workflow: 'bad name', limit: 2 }), InvalidNameError, /target\.workflow/],
      ['workflow with a colon', () => client.setLimits({ workflow: 'caps:shared', limit: 2 }), InvalidNameError, /target\.workflow/],
      ['empty workflow', () => client.setLimits({ workflow: '', limit: 2 }), InvalidNameError, /target\.workflow/],
      ['limit 0', () => client.setLimits({ workflow: wf, limit: 0 }), InvalidOptionError, /^limit/],
      ['limit -1', () => client.setLimits({ workflow: wf, limit: -1 }), InvalidOptionError, /^limit/],
      ['limit 1.5', () => client.setLimits({ workflow: wf, limit: 1.5 }), InvalidOptionError, /^limit/],
      ['limit NaN', () => client.setLimits({ limit: NaN }), InvalidOptionError, /^limit/],
      ['limit "2"', () => client.setLimits({ limit: '2' as never }), InvalidOptionError, /^limit/],
      ['limit missing', () => client.setLimits({ workflow: wf } as never), InvalidOptionError, /^limit/],
      ['limit too large', () => client.setLimits({ limit: MAX_LIMIT + 1 }), InvalidOptionError, /^limit/],
      ['group without workflow', () => client.setLimits({ group: 'g1', limit: 2 }), InvalidInputError, /target\.group/],
      ['group with braces', () => client.setLimits({ workflow: wf, group: 'g{1}', limit: 2 }), InvalidNameError, /target\.group/],
      ['getLimits: bad workflow', () => client.getLimits({ workflow: 'a b' }), InvalidNameError, /target\.workflow/],
      ['getLimits: group without workflow', () => client.getLimits({ group: 'g1' }), InvalidInputError, /target\.group/],
      ['getLimits: bad group', () => client.getLimits({ workflow: wf, group: 'x:y' }), InvalidNameError, /target\.group/],
    ];
    for (const [label, call, type, message] of cases) {
      const error = await call().then(
        () => new Error(`${label}: resolved`),
        (e: unknown) => e,
      );
      expect({ label, error }).toEqual({ label, error: expect.any(type) });
      expect({ label, message: (error as Error).message }).toEqual({ label, message: expect.stringMatching(message) });
    }
    expect(spy).not.toHaveBeenCalled();
    expect(await redis.exists(k.keys.limits)).toBe(0); // nothing was written
    // The spy does see the calls that are valid.
    expect(await client.setLimits({ workflow: wf, limit: 7 })).toBeNull();
    expect(await client.getLimits({ workflow: wf, group: 'g1' })).toEqual({
      namespace: null,
      workflow: 7,
      groupDefault: null,
      groupOverride: null,
      group: null,
      rateLimit: null,
      groupRateLimit: null,
      groupRateOverride: null,
      groupRate: null,
      setAtRuntime: { workflow: { declared: null } },
    });
    expect(spy).toHaveBeenCalled();
    spy.mockRestore();
  });

  it('rejects a missing target with a typed error', async () => {
    const { ns } = space();
    const producer = await start([LooseShared, { provide: APP, useValue: 'p' }], { namespace: ns, worker: { enabled: false } });
    for (const target of [null, undefined]) {
      await expect(producer.client.setLimits(target as never)).rejects.toBeInstanceOf(InvalidInputError);
    }
    await expect(producer.client.getLimits(null as never)).rejects.toBeInstanceOf(InvalidInputError);
  });
});

describe('caps written at bootstrap', () => {
  it('a later bootstrap that raises the group cap lets runs its old cap held back start', async () => {
    const { ns, k } = space();
    const first = await start([GroupOfOne], { namespace: ns, worker: { concurrency: 5 } }, logger);
    const handles = await Promise.all(['r1', 'r2', 'r3'].map((key) => first.client.enqueue(GroupOfOne, { key }, { group: 'g' })));
    await begun.get('r1').promise;
    expect((await first.client.get(handles[1].id))?.state).toBe('waiting');
    expect(await redis.scard(k.groupActive('caps.grp', 'g'))).toBe(1);
    logger.lines.length = 0;
    await start([GroupOfThree], { namespace: ns, worker: { concurrency: 5 } }, logger);
    expect(logger.lines).toContainEqual(expect.stringContaining('Fleet-wide cap wf:caps.grp:group changed from 1 to 3'));
    expect(await first.client.getLimits({ workflow: 'caps.grp', group: 'g' })).toMatchObject({ groupDefault: 3, group: 3 });
    // r1 still holds its slot: only the raised cap can let r2 and r3 start now.
    await within(Promise.all([begun.get('r2').promise, begun.get('r3').promise]), 5_000, 'r2 and r3 to start under the raised group cap');
    ['r1', 'r2', 'r3'].forEach((key) => gates.open(key));
    expect(await Promise.all(handles.map((h) => h.result({ timeoutMs: 10_000 })))).toEqual(['r1', 'r2', 'r3']);
  });
});

describe('the namespace cap (module option `concurrency`)', () => {
  it('holds across two workflows sharing it, and is reached', async () => {
    const { ns, k } = space();
    const app = await start([NsA, NsB], { namespace: ns, concurrency: 4, worker: { concurrency: 10 } });
    expect(await app.client.getLimits()).toEqual({ namespace: 4 });
    const sampler = sample(() => cardinalities(redis, [k.active('nscap.a'), k.active('nscap.b')]));
    const leases = sample(async () => (await app.client.stats()).namespace);
    const drained = completions([app], 300);
    await app.client.enqueueMany(
      NsA,
      Array.from({ length: 150 }, () => ({ input: { wf: 'a' } })),
    );
    await app.client.enqueueMany(
      NsB,
      Array.from({ length: 150 }, () => ({ input: { wf: 'b' } })),
    );
    await within(drained, 20_000, '300 runs to complete');
    const perWorkflow = await sampler.stop();
    const namespace = await leases.stop();
    expect(Math.max(...perWorkflow.map(([x, y]) => x + y))).toBe(4);
    expect(Math.max(...namespace.map((n) => n.active))).toBe(4);
    expect(namespace.every((n) => n.limit === 4)).toBe(true);
    expect(live.max('ns')).toBe(4);
    expect(perWorkflow.some(([x, y]) => x > 0 && y > 0)).toBe(true); // shared: both held slots at once
  });
});
