import type Redis from 'ioredis';
import { z } from 'zod';
import {
  InputValidationError,
  InvalidInputError,
  InvalidOptionError,
  OutputValidationError,
  UnknownWorkflowError,
  Workflow,
  WorkflowFailedError,
  defineWorkflow,
} from '../../lib';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { rejection } from '../support/rejection';
import {
  ArkWorkflow,
  AsyncWorkflow,
  BadOutputWorkflow,
  ParentWorkflow,
  SkewWorkflow,
  ValibotWorkflow,
  ZodOrder,
  ZodOrderWorkflow,
} from '../support/schema.workflows';
import { commandsBefore, monitorCommands } from '../support/workflows';

const T = { timeoutMs: 10_000 };

/** A declared schedule whose input the workflow's own schema refuses: the bootstrap fails. */
@Workflow('schema.scheduled', { input: z.object({ n: z.number() }), schedules: [{ cron: '@yearly', input: { n: 'x' as never } }] })
class BadScheduleWorkflow {
  async run(input: { n: number }): Promise<number> {
    return input.n;
  }
}

describe('Standard Schema validation of input and output', () => {
  let worker: TestApp;
  let producer: TestApp;
  let redis: Redis;
  let namespace: string;

  beforeAll(async () => {
    namespace = uniqueNamespace('schema');
    redis = rawRedis();
    worker = await createApp(
      [ZodOrderWorkflow, ValibotWorkflow, ArkWorkflow, AsyncWorkflow, BadOutputWorkflow, SkewWorkflow, ParentWorkflow],
      {
        namespace,
      },
    );
    // No workflow class and no worker: it knows schemas only through the contract.
    producer = await createApp([], { namespace, worker: { enabled: false } });
  });
  afterAll(async () => {
    await Promise.all([producer?.close(), worker?.close()]);
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  describe('zod (through a contract)', () => {
    const order = {
      items: [
        { sku: 'a', qty: 2 },
        { sku: 'b', qty: 3 },
      ],
      placedAt: '2026-03-01T00:00:00Z',
    };

    it('run gets the schema output (default, transform); the output schema transforms the stored result', async () => {
      const result = await worker.client.run(ZodOrder, order, { id: 'zod-ok', ...T });
      expect(result).toEqual({ units: 5, note: 'none', year: 2026, label: '5 units' });
      const stored = await worker.client.get('zod-ok');
      // The caller's raw input is stored (no default filled in, placedAt still a string).
      expect(stored?.input).toEqual(order);
      expect(stored?.result).toEqual(result);
    });

    it('a producer app without the workflow class validates through the contract, and runs good input', async () => {
      const error = await rejection(() =>
        producer.client.enqueue(
          ZodOrder,
          {
            items: [
              { sku: 'a', qty: 1 },
              { sku: 'b', qty: 0 },
              { sku: 3, qty: 'x' },
            ],
          } as never,
          {
            id: 'zod-producer-bad',
          },
        ),
      );
      expect(error).toBeInstanceOf(InputValidationError);
      expect(error).toBeInstanceOf(InvalidInputError);
      const { message, issues, workflow, field } = error as InputValidationError;
      expect({ workflow, field }).toEqual({ workflow: 'schema.zod', field: 'input' });
      expect(issues.map((issue) => issue.path)).toEqual([
        'input.items[1].qty',
        'input.items[2].sku',
        'input.items[2].qty',
        'input.placedAt',
      ]);
      expect(message).toMatch(/^input: does not match the input schema of workflow "schema\.zod" \(4 issues: input\.items\[1\]\.qty: /);
      for (const issue of issues) expect(message).toContain(`${issue.path}: ${issue.message}`);
      expect(await producer.client.get('zod-producer-bad')).toBeNull();

      expect(await producer.client.run(ZodOrder, { ...order, note: 'gift' }, T)).toEqual({
        units: 5,
        note: 'gift',
        year: 2026,
        label: '5 units',
      });
    });

    it('ctx.invoke and ctx.continueAsNew refuse an input the schema refuses (catchable), and take good ones', async () => {
      // By name: a class's input type is its run's parameter, the schema's output (carried filled in).
      const result = await worker.client.run('schema.parent', { round: 0 }, T);
      expect(result).toMatchObject({
        round: 1,
        child: { name: 'InputValidationError', issues: [{ path: 'input.items[0].qty' }] },
        next: { name: 'InputValidationError', issues: [{ path: 'input.round' }] },
        good: { units: 2, note: 'none', year: 2026, label: '2 units' },
      });
      expect((result as { child: { message: string } }).child.message).toMatch(/^ctx\.invoke input: .*input\.items\[0\]\.qty: /);
      expect((result as { next: { message: string } }).next.message).toMatch(/^ctx\.continueAsNew input: .*input\.round: /);
    });
  });

  it('valibot: validates input (every issue) and output, run gets the default', async () => {
    expect(await worker.client.run('schema.valibot', { name: 'ada' }, T)).toEqual({ greeting: 'hi ada (0 tags)' });
    const error = await rejection(() => worker.client.enqueue(ValibotWorkflow, { name: 'a', tags: [1] } as never));
    expect(error).toBeInstanceOf(InputValidationError);
    expect((error as InputValidationError).issues.map((issue) => issue.path)).toEqual(['input.name', 'input.tags[0]']);
    expect((error as Error).message).toMatch(/input\.name: .*; input\.tags\[0\]: /);
  });

  it('arktype: validates input (every issue) and output, by class and by name', async () => {
    expect(await worker.client.run(ArkWorkflow, { id: 'x', count: 21 }, T)).toEqual({ doubled: 42 });
    expect(await worker.client.run('schema.arktype', { id: 'y', count: 1 }, T)).toEqual({ doubled: 2 });
    const error = await rejection(() => worker.client.run('schema.arktype', { id: 7, count: -1.5 }));
    expect(error).toBeInstanceOf(InputValidationError);
    expect((error as InputValidationError).issues.map((issue) => issue.path)).toEqual(['input.count', 'input.id']);
  });

  it('enqueueMany validates every item, naming the item; one bad item writes nothing', async () => {
    const error = await rejection(() =>
      worker.client.enqueueMany(ArkWorkflow, [
        { input: { id: 'ok', count: 1 }, opts: { id: 'many-ok' } },
        { input: { id: 'bad', count: -1 } },
      ]),
    );
    expect(error).toBeInstanceOf(InputValidationError);
    expect((error as Error).message).toMatch(/^items\[1\]\.input: .*input\.count: /);
    expect(await worker.client.get('many-ok')).toBeNull();
    const handles = await worker.client.enqueueMany(ArkWorkflow, [{ input: { id: 'a', count: 1 } }, { input: { id: 'b', count: 2 } }]);
    expect(await Promise.all(handles.map((handle) => handle.result(T)))).toEqual([{ doubled: 2 }, { doubled: 4 }]);
  });

  it('an async schema validates input at the producer and output at the worker', async () => {
    expect(await worker.client.run(AsyncWorkflow, { user: 'ada' }, T)).toEqual({ ok: true });
    const refused = await rejection(() => worker.client.enqueue(AsyncWorkflow, { user: 'banned' }, { id: 'async-banned' }));
    expect(refused).toBeInstanceOf(InputValidationError);
    expect((refused as Error).message).toContain('input.user: user is banned');
    expect(await worker.client.get('async-banned')).toBeNull();

    const failed = await rejection(() => worker.client.run(AsyncWorkflow, { user: 'not-ok' }, { id: 'async-out', ...T }));
    expect(failed).toBeInstanceOf(WorkflowFailedError);
    expect((failed as WorkflowFailedError).causeName).toBe('OutputValidationError');
    expect((failed as WorkflowFailedError).causeMessage).toContain('output.ok: must be ok');
  });

  it('a result the output schema refuses fails the run at once, with nothing stored as its result', async () => {
    const failed = await rejection(() => worker.client.run(BadOutputWorkflow, undefined, { id: 'bad-output', ...T }));
    expect(failed).toBeInstanceOf(WorkflowFailedError);
    expect((failed as WorkflowFailedError).causeName).toBe(OutputValidationError.name);
    expect((failed as WorkflowFailedError).causeMessage).toMatch(
      /^The result of workflow "schema\.bad-output" does not match its output schema \(1 issue: output\.total: /,
    );
    const stored = await worker.client.get('bad-output');
    expect(stored).toMatchObject({ state: 'failed', attempts: 1, maxAttempts: 3, error: { name: 'OutputValidationError' } });
    expect(stored?.result).toBeUndefined();
    expect(worker.app.get(BadOutputWorkflow).calls).toBe(1);
  });

  it('version skew: an input enqueued by name without the schema fails the run without retries', async () => {
    // The producer has no class: by name, it knows no schema, so the input is stored as given.
    const handle = await producer.client.enqueue('schema.skew', { n: 'seven' }, { id: 'skew-1' });
    const failed = await rejection(() => handle.result(T));
    expect(failed).toBeInstanceOf(WorkflowFailedError);
    expect((failed as WorkflowFailedError).causeName).toBe('InputValidationError');
    expect((failed as WorkflowFailedError).causeMessage).toMatch(
      /^input: does not match the input schema of workflow "schema\.skew" \(1 issue: input\.n: /,
    );
    const stored = await producer.client.get('skew-1');
    expect(stored).toMatchObject({ state: 'failed', attempts: 1, failures: 1, maxAttempts: 3, error: { name: 'InputValidationError' } });
    expect(worker.app.get(SkewWorkflow).calls).toBe(0);

    const viaRun = await rejection(() => producer.client.run('schema.skew', { n: null }, T));
    expect((viaRun as WorkflowFailedError).causeName).toBe('InputValidationError');
    expect(await producer.client.run('schema.skew', { n: 7 }, T)).toBe(7);
  });

  it('runtime schedules validate their input before anything is written', async () => {
    const error = await rejection(() =>
      worker.client.schedule('schema.bad-sched', ArkWorkflow, { cron: '@yearly', input: { id: 1, count: 1 } as never }),
    );
    expect(error).toBeInstanceOf(InputValidationError);
    expect((error as Error).message).toMatch(/^opts\.input: .*input\.id: /);
    expect(await worker.client.getSchedule('schema.bad-sched')).toBeNull();
    // No input: the runs would get null, which the schema refuses too.
    await expect(worker.client.schedule('schema.no-input', ArkWorkflow, { cron: '@yearly' })).rejects.toBeInstanceOf(InputValidationError);
  });

  it("a worker whose declared schedule's input its schema refuses fails at bootstrap", async () => {
    const other = uniqueNamespace('schema-sched');
    const error = await rejection(() => createApp([BadScheduleWorkflow], { namespace: other }));
    expect(error).toBeInstanceOf(InputValidationError);
    expect((error as Error).message).toMatch(/^@Workflow\('schema\.scheduled'\) schedules\[0\]\.input: .*input\.n: /);
    expect(await redis.exists(`{sluice:${other}}:schedules`)).toBe(0);
    await dropNamespace(redis, other);
  });

  it('refuses a schema option that is not a Standard Schema where it is declared', () => {
    expect(() => defineWorkflow('schema.not', { input: { parse: () => 1 } as never })).toThrow(InvalidOptionError);
    expect(() => Workflow('schema.not', { output: z.string() as unknown as never })).not.toThrow();
    expect(() => Workflow('schema.not', { input: 'string' as never })).toThrow(
      /@Workflow\('schema\.not'\) input: must be a Standard Schema V1/,
    );
    // With a contract, its schemas are the workflow's: a different one here would contradict producers.
    expect(() => Workflow(ZodOrder, { input: z.object({}) })).toThrow(/input: differs from the contract's/);
  });
});

describe('a refused input sends nothing to Redis', () => {
  let producer: TestApp;
  let redis: Redis;
  let namespace: string;

  beforeAll(async () => {
    // A namespace of its own, with no worker: only the producer's calls could mention its keys.
    namespace = uniqueNamespace('schema-quiet');
    redis = rawRedis();
    producer = await createApp([], { namespace, worker: { enabled: false } });
  });
  afterAll(async () => {
    await producer?.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it('enqueue, run, enqueueMany and schedule by contract throw before any command; a good input does send', async () => {
    const monitor = await monitorCommands(namespace);
    try {
      const bad = { items: [], placedAt: 5 } as never;
      const calls = [
        () => producer.client.enqueue(ZodOrder, bad),
        () => producer.client.run(ZodOrder, bad, T),
        () => producer.client.enqueueMany(ZodOrder, [{ input: bad }]),
        () => producer.client.schedule('schema.quiet', ZodOrder, { cron: '@hourly', input: bad }),
      ];
      for (const call of calls) {
        const error = await rejection(call);
        expect(error).toBeInstanceOf(InputValidationError);
        expect((error as InputValidationError).issues.map((issue) => issue.path)).toEqual(['input.items', 'input.placedAt']);
      }
      const tag = `{sluice:${namespace}}`;
      const mine = (commands: string[][]) => commands.filter((args) => args.some((arg) => arg.includes(tag)));
      expect(mine(await commandsBefore(monitor, redis, 'schema-sentinel-1'))).toEqual([]);

      // Control: a good input reaches Redis (the fleet lookup: no worker registered the workflow here).
      const good = { items: [{ sku: 'a', qty: 1 }], placedAt: '2026-01-01' };
      await expect(producer.client.enqueue(ZodOrder, good)).rejects.toBeInstanceOf(UnknownWorkflowError);
      expect(mine(await commandsBefore(monitor, redis, 'schema-sentinel-2')).length).toBeGreaterThan(0);
    } finally {
      await monitor.close();
    }
  });
});
