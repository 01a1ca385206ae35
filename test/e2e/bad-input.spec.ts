import { Injectable, Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import {
  EnqueueOptions,
  InvalidInputError,
  InvalidNameError,
  InvalidOptionError,
  PayloadNotSerializableError,
  PayloadTooLargeError,
  QueueConfigError,
  QueueModule,
  QueueModuleOptions,
  Step,
  UnknownWorkflowError,
  Workflow,
  WorkflowDefinitionError,
} from '../../lib';
import { createApp, dropNamespace, rawRedis, TestApp, testConnection, uniqueNamespace } from '../support/app';
import { namespaceKeys } from '../support/workflows';
import { rejection } from '../support/rejection';
import type { ErrorClass } from '../support/error-class';

@Workflow('bad.echo')
class EchoWorkflow {
  async run(input: unknown): Promise<unknown> {
    return input;
  }
}

/** Reports what the run saw of its `{"__proto__": …}` input and of Object.prototype. */
@Workflow('bad.proto')
class ProtoWorkflow {
  async run(input: Record<string, unknown>): Promise<Record<string, unknown>> {
    const merged: Record<string, unknown> = Object.assign({}, input);
    return {
      globalPolluted: ({} as Record<string, unknown>).polluted ?? null,
      inputPolluted: input.polluted ?? null,
      mergedPolluted: merged.polluted ?? null,
      ownProto: Object.prototype.hasOwnProperty.call(input, '__proto__'),
      plainPrototype: Object.getPrototypeOf(input) === Object.prototype,
      keep: input.keep,
      // Hand a __proto__ key back too: the result path must decode it safely as well.
      echo: JSON.parse('{"__proto__":{"polluted":"from-result"},"ok":true}'),
    };
  }
}

describe('bad input through QueueClient', () => {
  let t: TestApp;
  let namespace: string;
  let redis: Redis;

  beforeAll(async () => {
    namespace = uniqueNamespace('bad');
    // Producer only, so nothing but the calls under test could write to this namespace.
    t = await createApp([EchoWorkflow], { namespace, worker: { enabled: false }, maxPayloadBytes: 1024 });
    redis = rawRedis();
  });
  afterAll(async () => {
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  const circular: Record<string, unknown> = {};
  circular.self = circular;
  const longId = 'x'.repeat(201);

  const cases: Array<[string, () => Promise<unknown>, ErrorClass]> = [
    ['unknown workflow name', () => t.client.enqueue('no.such.workflow', {}), UnknownWorkflowError],
    ['unknown workflow name in run()', () => t.client.run('no.such.workflow', {}), UnknownWorkflowError],
    ['unknown workflow name in enqueueMany()', () => t.client.enqueueMany('no.such.workflow', [{ input: {} }]), UnknownWorkflowError],
    [
      'a class without @Workflow',
      () =>
        t.client.enqueue(
          class Plain {
            run() {}
          },
          {},
        ),
      UnknownWorkflowError,
    ],
    ['a function in the input', () => t.client.enqueue(EchoWorkflow, { fn: () => 1 }), PayloadNotSerializableError],
    ['a symbol in the input', () => t.client.enqueue(EchoWorkflow, { n: Symbol('s') }), PayloadNotSerializableError],
    ['a circular input', () => t.client.enqueue(EchoWorkflow, circular), PayloadNotSerializableError],
    ['a WeakMap in the input', () => t.client.enqueue(EchoWorkflow, { m: new WeakMap() }), PayloadNotSerializableError],
    ['a Promise as the input', () => t.client.enqueue(EchoWorkflow, Promise.resolve(1)), PayloadNotSerializableError],
    ['a hole in an array in the input', () => t.client.enqueue(EchoWorkflow, { list: new Array(2) }), PayloadNotSerializableError],
    ['an input over maxPayloadBytes', () => t.client.enqueue(EchoWorkflow, { blob: 'x'.repeat(1100) }), PayloadTooLargeError],
    ['an input over maxPayloadBytes in run()', () => t.client.run(EchoWorkflow, 'y'.repeat(2000)), PayloadTooLargeError],
    ['an empty id', () => t.client.enqueue(EchoWorkflow, {}, { id: '' }), InvalidNameError],
    ['an overlong id', () => t.client.enqueue(EchoWorkflow, {}, { id: longId }), InvalidNameError],
    ['an id with braces', () => t.client.enqueue(EchoWorkflow, {}, { id: '{x}' }), InvalidNameError],
    ['an id with a space', () => t.client.enqueue(EchoWorkflow, {}, { id: 'a b' }), InvalidNameError],
    ['a group with a colon', () => t.client.enqueue(EchoWorkflow, {}, { group: 'tenant:1' }), InvalidNameError],
    ['a group with braces', () => t.client.enqueue(EchoWorkflow, {}, { group: '{t}' }), InvalidNameError],
    ['an empty group', () => t.client.enqueue(EchoWorkflow, {}, { group: '' }), InvalidNameError],
    ['a negative delayMs', () => t.client.enqueue(EchoWorkflow, {}, { delayMs: -1 }), InvalidOptionError],
    ['a NaN delayMs', () => t.client.enqueue(EchoWorkflow, {}, { delayMs: NaN }), InvalidOptionError],
    ['a malformed delayMs', () => t.client.enqueue(EchoWorkflow, {}, { delayMs: 'ten seconds' }), InvalidOptionError],
    ['both delay and delayMs', () => t.client.enqueue(EchoWorkflow, {}, { delay: 5, delayMs: 5 }), InvalidOptionError],
    ['a negative priority', () => t.client.enqueue(EchoWorkflow, {}, { priority: -1 }), InvalidOptionError],
    ['a NaN priority', () => t.client.enqueue(EchoWorkflow, {}, { priority: NaN }), InvalidOptionError],
    ['a fractional priority', () => t.client.enqueue(EchoWorkflow, {}, { priority: 0.5 }), InvalidOptionError],
    ['negative attempts', () => t.client.enqueue(EchoWorkflow, {}, { attempts: -1 }), InvalidOptionError],
    ['NaN attempts', () => t.client.enqueue(EchoWorkflow, {}, { attempts: NaN }), InvalidOptionError],
    ['zero attempts', () => t.client.enqueue(EchoWorkflow, {}, { attempts: 0 }), InvalidOptionError],
    ['an invalid runAt', () => t.client.enqueue(EchoWorkflow, {}, { runAt: new Date('never') }), InvalidOptionError],
    ['a negative timeoutMs in run()', () => t.client.run(EchoWorkflow, {}, { timeoutMs: -1 }), InvalidOptionError],
    [
      'an unknown option (a typo of delayMs)',
      () => t.client.enqueue(EchoWorkflow, {}, { delayMS: 5_000 } as EnqueueOptions),
      InvalidOptionError,
    ],
    [
      'a wait option given to enqueue()',
      () => t.client.enqueue(EchoWorkflow, {}, { timeoutMs: 5_000 } as EnqueueOptions),
      InvalidOptionError,
    ],
    ['an unknown option in run()', () => t.client.run(EchoWorkflow, {}, { timeout: 5_000 } as EnqueueOptions), InvalidOptionError],
    [
      'an unknown option of an enqueueMany() item',
      () => t.client.enqueueMany(EchoWorkflow, [{ input: {}, opts: { prio: 1 } as EnqueueOptions }]),
      InvalidOptionError,
    ],
    ['items that are not an array', () => t.client.enqueueMany(EchoWorkflow, {} as never), InvalidInputError],
    ['get() with an id with braces', () => t.client.get('{x}'), InvalidNameError],
    ['wait() with an id with a space', () => t.client.wait('a b'), InvalidNameError],
    ['wait() with a negative timeout', () => t.client.wait('some-id', { timeoutMs: -5 }), InvalidOptionError],
    ['wait() with an unknown option', () => t.client.wait('some-id', { timeout: 5 } as never), InvalidOptionError],
  ];

  it.each(cases)('rejects %s with a typed error', async (_label, call, type) => {
    const error = await rejection(call);
    expect(error).toBeInstanceOf(type);
    expect(error).toBeInstanceOf(InvalidInputError);
    expect((error as Error).message).toMatch(/^[\w.[\]]+: /); // names the offending field
  });

  it('enqueueMany with one bad item rejects the whole batch and writes nothing', async () => {
    const items: Array<{ input: unknown; opts?: EnqueueOptions }> = [
      { input: { ok: 1 }, opts: { id: 'batch-good-1' } },
      { input: { ok: 2 }, opts: { priority: -3 } },
      { input: { ok: 3 }, opts: { id: 'batch-good-3' } },
    ];
    const error = await rejection(() => t.client.enqueueMany(EchoWorkflow, items));
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as Error).message).toContain('items[1]');
    expect(await t.client.get('batch-good-1')).toBeNull();
  });

  it('nothing at all was written to Redis by the rejected calls (and the scan does see real writes)', async () => {
    for (const [, call] of cases) await rejection(call).catch(() => undefined);
    // Only the key layout marker the bootstrap wrote (see docs/upgrades.md).
    expect(await namespaceKeys(redis, namespace)).toEqual([`{sluice:${namespace}}:schema`]);

    const handle = await t.client.enqueue(EchoWorkflow, { ok: true }, { id: 'control' });
    expect(await namespaceKeys(redis, namespace)).toContain(`{sluice:${namespace}}:run:${handle.id}`);
  });
});

describe('a {"__proto__": …} input', () => {
  let t: TestApp;
  let namespace: string;
  let redis: Redis;

  beforeAll(async () => {
    namespace = uniqueNamespace('proto');
    t = await createApp([ProtoWorkflow], { namespace });
    redis = rawRedis();
  });
  afterAll(async () => {
    delete (Object.prototype as Record<string, unknown>).polluted;
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });

  it('round-trips through a run without touching Object.prototype', async () => {
    const input = JSON.parse('{"__proto__": {"polluted": true}, "keep": 1}') as Record<string, unknown>;
    expect(Object.prototype.hasOwnProperty.call(input, '__proto__')).toBe(true); // an own key, as an HTTP body would have
    const handle = await t.client.enqueue(ProtoWorkflow, input);
    const out = (await handle.result({ timeoutMs: 10_000 })) as Record<string, unknown>;
    expect(out).toMatchObject({
      globalPolluted: null,
      inputPolluted: null,
      mergedPolluted: null,
      ownProto: false,
      plainPrototype: true,
      keep: 1,
    });
    const echo = out.echo as Record<string, unknown>;
    expect(echo.ok).toBe(true);
    expect(Object.assign({}, echo).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();

    const stored = (await t.client.get(handle.id))!;
    expect(Object.assign({}, stored.input as object)).toEqual({ keep: 1 });
    expect(Object.assign({}, stored.result as object)).not.toHaveProperty('polluted');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('bootstrap failures', () => {
  async function bootstrap(providers: Provider[], options: Partial<QueueModuleOptions> = {}): Promise<unknown> {
    let app;
    try {
      app = await Test.createTestingModule({
        imports: [
          QueueModule.forRoot({ connection: testConnection(), namespace: uniqueNamespace('boot'), worker: { enabled: false }, ...options }),
        ],
        providers,
      }).compile();
      app.useLogger(false);
      await app.init();
    } catch (error) {
      return error;
    } finally {
      await app?.close().catch(() => undefined);
    }
    throw new Error('the application started');
  }

  it('duplicate workflow names', async () => {
    @Workflow('dup.name')
    class FirstDup {
      async run() {}
    }
    @Workflow('dup.name')
    class SecondDup {
      async run() {}
    }
    const error = await bootstrap([FirstDup, SecondDup]);
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    expect((error as Error).message).toMatch(/Duplicate workflow name "dup\.name".*FirstDup.*SecondDup/);
  });

  it('a @Workflow class without run', async () => {
    @Workflow('no.run')
    class NoRunWorkflow {
      async execute() {}
    }
    const error = await bootstrap([NoRunWorkflow]);
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    expect((error as Error).message).toMatch(/no\.run.*NoRunWorkflow.*no run\(/);
  });

  it('a @Step method on a class without @Workflow', async () => {
    @Injectable()
    class OrphanSteps {
      @Step() async charge() {
        return 1;
      }
    }
    const error = await bootstrap([OrphanSteps]);
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    expect((error as Error).message).toMatch(/OrphanSteps.*charge.*no @Workflow/);
  });

  it('an invalid namespace is a QueueConfigError', async () => {
    const error = await bootstrap([EchoWorkflow], { namespace: 'a:b' });
    expect(error).toBeInstanceOf(QueueConfigError);
    expect((error as Error).message).toContain('namespace');
  });

  it('a valid set of workflows starts (the helper is not always failing)', async () => {
    await expect(bootstrap([EchoWorkflow])).rejects.toThrow('the application started');
  });
});
