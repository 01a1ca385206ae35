import fc from 'fast-check';
import {
  InvalidInputError,
  InvalidNameError,
  InvalidOptionError,
  MAX_PRIORITY,
  PayloadNotSerializableError,
  QueueConfigError,
} from '../../lib';
import type { EnqueueOptions } from '../../lib/interfaces/enqueue.options';
import { buildEnqueueRequest } from '../../lib/workflow/enqueue.request';
import { newRunId, runIdTime } from '../../lib/workflow/run-id';
import { DEFAULT_BACKOFF, QueueModuleOptions, resolveQueueOptions } from '../../lib/interfaces/queue.options';
import { DEFAULT_MAX_PAYLOAD_BYTES } from '../../lib/interfaces/payload.limits';
import { checkInteger, toMilliseconds } from '../../lib/util/duration';
import { checkId, checkName, MAX_ID_LENGTH, MAX_NAME_LENGTH } from '../../lib/util/names';
import { backoffDelay } from '../../lib/execution/retry.policy';
import type { ErrorClass } from '../support/error-class';

describe('names', () => {
  it.each(['a', 'order.fulfil', 'A-1_b.c', '9lives', 'x'.repeat(MAX_NAME_LENGTH)])('checkName accepts %p', (name) => {
    expect(checkName(name, 'f')).toBe(name);
  });

  it.each([
    ['empty', ''],
    ['overlong', 'x'.repeat(MAX_NAME_LENGTH + 1)],
    ['a colon', 'a:b'],
    ['an opening brace', 'a{b'],
    ['a closing brace', 'a}b'],
    ['a space', 'a b'],
    ['a tab', 'a\tb'],
    ['a leading dot', '.a'],
    ['a leading dash', '-a'],
    ['a slash', 'a/b'],
    ['a non-string', 42],
    ['undefined', undefined],
  ])('checkName rejects %s', (_label, name) => {
    expect(() => checkName(name, 'opts.group')).toThrow(InvalidNameError);
    expect(() => checkName(name, 'opts.group')).toThrow(/^opts\.group: /);
  });

  it.each(['a', 'order-1', 'tenant:42', 'a/b@c#d=e+f', 'x'.repeat(MAX_ID_LENGTH)])('checkId accepts %p', (id) => {
    expect(checkId(id, 'f')).toBe(id);
  });

  it.each([
    ['empty', ''],
    ['overlong', 'x'.repeat(MAX_ID_LENGTH + 1)],
    ['braces', '{a}'],
    ['a brace', 'a}'],
    ['a space', 'a b'],
    ['a newline', 'a\nb'],
    ['a non-string', 7],
  ])('checkId rejects %s', (_label, id) => {
    expect(() => checkId(id, 'opts.id')).toThrow(InvalidNameError);
  });
});

describe('toMilliseconds', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['10m', 600_000],
    ['2h', 7_200_000],
    ['1d', 86_400_000],
    ['1.5s', 1_500],
    [' 5s ', 5_000],
    [0, 0],
    [250, 250],
    [1.4, 1],
  ])('%p is %p ms', (value, ms) => {
    expect(toMilliseconds(value, 'delay')).toBe(ms);
  });

  it.each([['10'], ['abc'], ['-5s'], ['5 sec'], ['1.5.2s'], ['s'], [''], ['5w']])('rejects the string %p', (value) => {
    expect(() => toMilliseconds(value, 'opts.delay')).toThrow(InvalidOptionError);
    expect(() => toMilliseconds(value, 'opts.delay')).toThrow(/^opts\.delay: /);
  });

  it.each([[-1], [NaN], [Infinity], [-Infinity], [11 * 365 * 86_400_000]])('rejects the number %p', (value) => {
    expect(() => toMilliseconds(value, 'opts.delay')).toThrow(InvalidOptionError);
  });

  it('rejects other types', () => {
    expect(() => toMilliseconds(null as unknown as number, 'd')).toThrow(InvalidOptionError);
    expect(() => toMilliseconds({} as unknown as number, 'd')).toThrow(InvalidOptionError);
  });

  it('checkInteger bounds', () => {
    expect(checkInteger(3, 'f', 1, 5)).toBe(3);
    for (const bad of [0, 6, 2.5, NaN, '3', undefined]) expect(() => checkInteger(bad, 'f', 1, 5)).toThrow(InvalidOptionError);
  });
});

describe('newRunId', () => {
  it('gives 16 base64url characters starting with a letter, none repeated over many pools', () => {
    const ids = Array.from({ length: 20_000 }, () => newRunId());
    for (const id of ids) expect(id).toMatch(/^[A-Za-z][\w-]{15}$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect(checkId(ids[0], 'opts.id')).toBe(ids[0]); // a valid id to give back as opts.id
  });

  it('carries its creation time in its first 7 characters, and a letter first until 2083', () => {
    const now = Date.now();
    expect(runIdTime(newRunId(now))).toBe(now);
    const lastLetter = Date.UTC(2083, 0, 1);
    expect(newRunId(lastLetter)).toMatch(/^z/);
    expect(runIdTime(newRunId(lastLetter))).toBe(lastLetter);
    expect(runIdTime('order-42')).toBeUndefined();
    expect(runIdTime('with space inside')).toBeUndefined();
    expect(runIdTime('abc def ghijklmn')).toBeUndefined();
  });
});

describe('buildEnqueueRequest', () => {
  const wf = { name: 'wf', attempts: 4 };
  const build = (opts?: EnqueueOptions, input: unknown = { x: 1 }, max = DEFAULT_MAX_PAYLOAD_BYTES) =>
    buildEnqueueRequest(wf, input, opts, max);

  it('fills defaults', () => {
    const request = build();
    expect(request.id).toMatch(/^[A-Za-z][\w-]{15}$/);
    expect(request.idGenerated).toBe(true);
    expect(request).toMatchObject({
      workflow: 'wf',
      input: '{"x":1}',
      priority: 0,
      delayMs: 0,
      runAtMs: undefined,
      attempts: 4,
      group: undefined,
    });
    expect(build().id).not.toBe(request.id);
  });

  it('takes valid options', () => {
    const runAt = new Date(Date.now() + 60_000);
    const request = build({ id: 'order:1', delayMs: '10s', runAt, priority: MAX_PRIORITY, group: 'tenant-1', attempts: 7 });
    expect(request).toMatchObject({
      id: 'order:1',
      delayMs: 10_000,
      runAtMs: runAt.getTime(),
      priority: MAX_PRIORITY,
      group: 'tenant-1',
      attempts: 7,
    });
  });

  const bad: Array<[string, EnqueueOptions, ErrorClass]> = [
    ['empty id', { id: '' }, InvalidNameError],
    ['overlong id', { id: 'x'.repeat(MAX_ID_LENGTH + 1) }, InvalidNameError],
    ['id with braces', { id: '{x}' }, InvalidNameError],
    ['id with a space', { id: 'a b' }, InvalidNameError],
    ['empty group', { group: '' }, InvalidNameError],
    ['overlong group', { group: 'g'.repeat(MAX_NAME_LENGTH + 1) }, InvalidNameError],
    ['group with a brace', { group: 'g{' }, InvalidNameError],
    ['group with a colon', { group: 'tenant:1' }, InvalidNameError],
    ['negative priority', { priority: -1 }, InvalidOptionError],
    ['NaN priority', { priority: NaN }, InvalidOptionError],
    ['fractional priority', { priority: 1.5 }, InvalidOptionError],
    ['priority above the maximum', { priority: MAX_PRIORITY + 1 }, InvalidOptionError],
    ['negative delayMs', { delayMs: -1 }, InvalidOptionError],
    ['NaN delayMs', { delayMs: NaN }, InvalidOptionError],
    ['malformed delayMs string', { delayMs: 'soon' }, InvalidOptionError],
    ['zero attempts', { attempts: 0 }, InvalidOptionError],
    ['negative attempts', { attempts: -2 }, InvalidOptionError],
    ['NaN attempts', { attempts: NaN }, InvalidOptionError],
    ['fractional attempts', { attempts: 2.5 }, InvalidOptionError],
    ['invalid runAt date', { runAt: new Date('nope') }, InvalidOptionError],
    ['runAt not a Date', { runAt: '2030-01-01' as unknown as Date }, InvalidOptionError],
  ];
  it.each(bad)('rejects %s', (_label, opts, type) => {
    let error: unknown;
    try {
      build(opts);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(type);
    expect(error).toBeInstanceOf(InvalidInputError);
    expect((error as InvalidInputError).field).toMatch(/^opts\./);
  });

  it('rejects opts that are not an object', () => {
    expect(() => build(5 as unknown as EnqueueOptions)).toThrow(InvalidOptionError);
    expect(() => build(null as unknown as EnqueueOptions)).toThrow(InvalidOptionError);
  });

  it('rejects a non-serializable or oversized input', () => {
    expect(() => build({}, { f: () => 1 })).toThrow(PayloadNotSerializableError);
    expect(() => build({}, 'x'.repeat(100), 50)).toThrow(/maxPayloadBytes/);
  });
});

describe('resolveQueueOptions', () => {
  const connection = { url: 'redis://127.0.0.1:1' };
  const resolve = (extra: Partial<QueueModuleOptions>) => resolveQueueOptions({ connection, ...extra });

  it('fills defaults', () => {
    const resolved = resolve({});
    expect(resolved).toEqual({
      connection,
      prefix: 'sluice',
      namespace: 'default',
      worker: {
        enabled: true,
        concurrency: 10,
        lockMs: 30_000,
        stalledIntervalMs: 15_000,
        maxStalls: 3,
        shutdownTimeoutMs: 30_000,
        timeline: true,
      },
      defaults: { attempts: 3, backoff: DEFAULT_BACKOFF, resultTtlMs: 86_400_000 },
      maxPayloadBytes: DEFAULT_MAX_PAYLOAD_BYTES,
      maxRunMemoBytes: 16 * 1024 * 1024,
      redisTimeoutMs: 10_000,
      fastPath: true,
      compactRunRecords: false,
      migrate: true,
      telemetry: { enabled: true },
      strict: false,
      logging: { attemptFailed: 'warn' },
    });
  });

  it('accepts duration strings for the time options', () => {
    const resolved = resolve({ worker: { lockMs: '20s', stalledIntervalMs: '500ms', shutdownTimeoutMs: '1m' }, redisTimeoutMs: '2s' });
    expect(resolved.worker).toMatchObject({ lockMs: 20_000, stalledIntervalMs: 500, shutdownTimeoutMs: 60_000 });
    expect(resolved.redisTimeoutMs).toBe(2_000);
  });

  it.each<[string, unknown, RegExp]>([
    ['a connection whose url is unset (e.g. process.env.REDIS_URL)', { connection: { url: undefined } }, /no url, host or port/],
    ['an empty connection object', { connection: {} }, /no url, host or port/],
    ['a url without a scheme', { connection: { url: '127.0.0.1:6379' } }, /redis:\/\/ or rediss:\/\//],
    ['an ioredis instance with keyPrefix', { connection: fakeInstance({ keyPrefix: 'app:' }) }, /keyPrefix "app:"/],
    ['a malformed duration', { connection, worker: { lockMs: '30 sec' } }, /worker\.lockMs/],
    ['zero redisTimeoutMs', { connection, redisTimeoutMs: 0 }, /redisTimeoutMs/],
    ['a migrate option that is not a boolean', { connection, migrate: 'no' }, /migrate must be true or false/],
    ['a strict option that is not a boolean', { connection, strict: 1 }, /strict must be true or false/],
    // 'false' as a string is truthy: taken as given, it would have turned the worker or the fast path on.
    ['a worker.enabled that is not a boolean', { connection, worker: { enabled: 'false' } }, /worker\.enabled must be true or false/],
    ['a fastPath that is not a boolean', { connection, fastPath: 'false' }, /fastPath must be true or false/],
    [
      'an unknown logging.attemptFailed level',
      { connection, logging: { attemptFailed: 'info' } },
      /logging\.attemptFailed must be 'warn', 'debug' or false, got "info"/,
    ],
    ['a logging option that is not an object', { connection, logging: 'debug' }, /logging must be an object/],
  ])('rejects %s with a QueueConfigError', (_, options, message) => {
    expect(() => resolveQueueOptions(options as QueueModuleOptions)).toThrow(QueueConfigError);
    expect(() => resolveQueueOptions(options as QueueModuleOptions)).toThrow(message);
  });

  it('accepts an ioredis instance without keyPrefix, and a bare port', () => {
    expect(() => resolveQueueOptions({ connection: fakeInstance({}) as never })).not.toThrow();
    expect(() => resolveQueueOptions({ connection: { port: 6380 } })).not.toThrow();
  });

  it('derives stalledIntervalMs from lockMs and completes a partial backoff', () => {
    const resolved = resolve({ worker: { lockMs: 1001 }, defaults: { backoff: { delayMs: 10 } } });
    expect(resolved.worker.stalledIntervalMs).toBe(501);
    expect(resolved.defaults.backoff).toEqual({ delayMs: 10, factor: 2, maxDelayMs: DEFAULT_BACKOFF.maxDelayMs });
  });

  it.each<[string, unknown, RegExp]>([
    ['no options', undefined, /required/],
    ['no connection', {}, /connection/],
    ['a connection that is a string', { connection: 'redis://x' }, /connection/],
    ['a namespace with a colon', { connection, namespace: 'a:b' }, /namespace/],
    ['an empty namespace', { connection, namespace: '' }, /namespace/],
    ['a prefix with braces', { connection, prefix: '{p}' }, /prefix/],
    ['zero worker concurrency', { connection, worker: { concurrency: 0 } }, /worker\.concurrency/],
    ['fractional worker concurrency', { connection, worker: { concurrency: 1.5 } }, /worker\.concurrency/],
    ['negative lockMs', { connection, worker: { lockMs: -1 } }, /worker\.lockMs/],
    ['NaN stalledIntervalMs', { connection, worker: { stalledIntervalMs: NaN } }, /worker\.stalledIntervalMs/],
    ['negative maxStalls', { connection, worker: { maxStalls: -1 } }, /worker\.maxStalls/],
    ['Infinity shutdownTimeoutMs', { connection, worker: { shutdownTimeoutMs: Infinity } }, /worker\.shutdownTimeoutMs/],
    ['zero default attempts', { connection, defaults: { attempts: 0 } }, /defaults\.attempts/],
    ['negative backoff delay', { connection, defaults: { backoff: { delayMs: -5 } } }, /defaults\.backoff\.delayMs/],
    ['zero backoff factor', { connection, defaults: { backoff: { delayMs: 5, factor: 0 } } }, /defaults\.backoff\.factor/],
    ['negative backoff cap', { connection, defaults: { backoff: { delayMs: 5, maxDelayMs: -1 } } }, /defaults\.backoff\.maxDelayMs/],
    ['zero resultTtlMs', { connection, defaults: { resultTtlMs: 0 } }, /defaults\.resultTtlMs/],
    ['zero maxPayloadBytes', { connection, maxPayloadBytes: 0 }, /maxPayloadBytes/],
  ])('rejects %s with QueueConfigError', (_label, options, message) => {
    expect(() => resolveQueueOptions(options as QueueModuleOptions)).toThrow(QueueConfigError);
    expect(() => resolveQueueOptions(options as QueueModuleOptions)).toThrow(message);
  });
});

describe('backoffDelay', () => {
  const backoff = { delayMs: 100, factor: 2, maxDelayMs: 1_000 };
  const middle = () => 0.5; // jitter factor exactly 1

  it('grows exponentially and is capped', () => {
    expect([1, 2, 3, 4, 5, 10].map((failures) => backoffDelay(backoff, failures, middle))).toEqual([100, 200, 400, 800, 1_000, 1_000]);
  });

  it('treats zero failures like the first', () => {
    expect(backoffDelay(backoff, 0, middle)).toBe(100);
  });

  it('jitters by ±20 % at the random extremes', () => {
    expect(backoffDelay(backoff, 1, () => 0)).toBe(80);
    expect(backoffDelay(backoff, 1, () => 0.999999)).toBe(120);
    expect(backoffDelay(backoff, 20, () => 0)).toBe(800);
  });

  it('stays within the jitter bounds for any random value', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (failures, r) => {
        const base = Math.min(backoff.maxDelayMs, backoff.delayMs * 2 ** (failures - 1));
        const delay = backoffDelay(backoff, failures, () => r);
        return Number.isInteger(delay) && delay >= Math.floor(base * 0.8) && delay <= Math.ceil(base * 1.2);
      }),
    );
  });

  it('honours a custom factor and a zero delay', () => {
    expect(backoffDelay({ delayMs: 10, factor: 3, maxDelayMs: 10_000 }, 3, middle)).toBe(90);
    expect(backoffDelay({ delayMs: 0, factor: 2, maxDelayMs: 10_000 }, 5, () => 0.9)).toBe(0);
  });
});

/** Just enough of an ioredis instance for option checks (no connection is made). */
function fakeInstance(options: Record<string, unknown>): unknown {
  return { options, duplicate: () => undefined, defineCommand: () => undefined };
}
