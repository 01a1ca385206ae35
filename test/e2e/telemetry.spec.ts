import { context, metrics, propagation, SpanKind, SpanStatusCode, trace, TraceFlags } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type Redis from 'ioredis';
import { QueueModuleOptions, RunContext, Step, TELEMETRY_METRICS, Workflow, WorkflowFailedError } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { newCallId } from '../../lib/redis/commands/call-id';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { enqueueArgs, enqueueKeys, enqueueReply, fakePark } from '../support/queue-state';
import { scriptsOn } from '../support/scripts';
import { Gates, pollUntil } from '../support/workflows';

/**
 * OpenTelemetry (lib/telemetry): spans per attempt and per executed step, the enqueue's trace
 * context carried to the worker, the metrics, and the two ways of having none (telemetry off,
 * and no `@opentelemetry/api` at all). The SDK here is the real one with in-memory exporters.
 */
const spans = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
const meterProvider = new MeterProvider({ readers: [reader] });
const tracer = tracerProvider.getTracer('test');
const gates = new Gates();

@Workflow('otel.order', { attempts: 3, backoff: { delayMs: 0 } })
class OrderWorkflow {
  async run(input: { key: string; failOnce?: boolean; hold?: boolean }, ctx: RunContext) {
    const reserved = await ctx.step('reserve', () => `reserved-${input.key}`);
    const charged = await this.charge(input.key);
    if (input.hold) await gates.get(input.key).promise;
    if (input.failOnce && ctx.attempt === 1) throw new Error(`first attempt of ${input.key} fails`);
    return { reserved, charged };
  }

  @Step() async charge(key: string) {
    return `charged-${key}`;
  }
}

@Workflow('otel.fatal', { attempts: 1 })
class FatalWorkflow {
  async run(input: { key: string }, ctx: RunContext) {
    await ctx.step('explode', () => {
      throw new TypeError(`${input.key} cannot be processed`);
    });
  }
}

const WORKFLOWS = [OrderWorkflow, FatalWorkflow];
let redis: Redis;
let app: TestApp;
const namespaces: string[] = [];

function sluiceSpans(): ReadableSpan[] {
  return spans.getFinishedSpans().filter((span) => span.instrumentationScope.name === 'nest-sluice');
}

/** The attempt spans of a run, by attempt, once `count` of them ended (a span ends after the commit, maybe after the waiter heard). */
async function attemptSpans(runId: string, count: number): Promise<ReadableSpan[]> {
  const found = await pollUntil(
    async () => sluiceSpans().filter((span) => span.kind === SpanKind.CONSUMER && span.attributes['sluice.run.id'] === runId),
    (list) => list.length >= count,
    `${count} attempt span(s) of ${runId}`,
  );
  return found.sort((a, b) => Number(a.attributes['sluice.run.attempt']) - Number(b.attributes['sluice.run.attempt']));
}

function childrenOf(parent: ReadableSpan): ReadableSpan[] {
  return sluiceSpans().filter((span) => span.parentSpanContext?.spanId === parent.spanContext().spanId);
}

async function startApp(options: Partial<QueueModuleOptions> = {}): Promise<TestApp> {
  const namespace = uniqueNamespace('otel');
  namespaces.push(namespace);
  return createApp(WORKFLOWS, { namespace, defaults: { backoff: { delayMs: 0 } }, ...options });
}

beforeAll(async () => {
  // What an app's tracing bootstrap does, before Nest starts (the meter is taken at worker start).
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
  redis = rawRedis();
  app = await startApp();
});

afterAll(async () => {
  gates.openAll();
  await app?.close();
  for (const namespace of namespaces) await dropNamespace(redis, namespace);
  redis.disconnect();
  await Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()]);
  trace.disable();
  metrics.disable();
  propagation.disable();
  context.disable();
});

describe('spans', () => {
  it('gives each attempt a CONSUMER span with a child per executed step; a retry marks its replayed steps', async () => {
    const handle = await app.client.enqueue(OrderWorkflow, { key: 'a', failOnce: true });
    await expect(handle.result({ timeoutMs: 10_000 })).resolves.toEqual({ reserved: 'reserved-a', charged: 'charged-a' });
    const [first, second] = await attemptSpans(handle.id, 2);

    for (const [span, attempt] of [
      [first, 1],
      [second, 2],
    ] as const) {
      expect(span.name).toBe('process otel.order');
      expect(span.kind).toBe(SpanKind.CONSUMER);
      expect(span.parentSpanContext).toBeUndefined(); // enqueued outside any trace: a trace of its own
      expect(span.attributes).toMatchObject({
        'messaging.system': 'sluice',
        'messaging.operation.type': 'process',
        'messaging.destination.name': 'otel.order',
        'messaging.message.id': handle.id,
        'sluice.workflow': 'otel.order',
        'sluice.run.id': handle.id,
        'sluice.run.attempt': attempt,
        'sluice.namespace': namespaces[0],
      });
    }

    // Attempt 1 executed both steps, then failed: error status, the exception recorded.
    expect(first.attributes).toMatchObject({ 'sluice.run.outcome': 'retry', 'error.type': 'Error' });
    expect(first.status).toEqual({ code: SpanStatusCode.ERROR, message: 'Error: first attempt of a fails' });
    expect(first.events.find((event) => event.name === 'exception')?.attributes).toMatchObject({
      'exception.message': 'first attempt of a fails',
    });
    const steps = childrenOf(first);
    expect(steps.map((span) => [span.name, span.kind, span.attributes['sluice.step.key']])).toEqual([
      ['step reserve', SpanKind.INTERNAL, 'reserve#1'],
      ['step charge', SpanKind.INTERNAL, 'charge#1'],
    ]);
    for (const step of steps) {
      expect(step.status.code).toBe(SpanStatusCode.UNSET);
      expect(step.spanContext().traceId).toBe(first.spanContext().traceId);
    }

    // Attempt 2 replayed them: no step spans, one event each, and their count.
    expect(second.attributes).toMatchObject({ 'sluice.run.outcome': 'completed', 'sluice.run.replayed_steps': 2 });
    expect(second.status.code).toBe(SpanStatusCode.UNSET);
    expect(childrenOf(second)).toEqual([]);
    expect(second.events.filter((event) => event.name === 'sluice.step.replayed').map((event) => event.attributes)).toEqual([
      { 'sluice.step.name': 'reserve', 'sluice.step.key': 'reserve#1' },
      { 'sluice.step.name': 'charge', 'sluice.step.key': 'charge#1' },
    ]);
  });

  it('records a failure for good on the attempt and on the step that threw', async () => {
    const handle = await app.client.enqueue(FatalWorkflow, { key: 'f' });
    await expect(handle.result({ timeoutMs: 10_000 })).rejects.toBeInstanceOf(WorkflowFailedError);
    const [attempt] = await attemptSpans(handle.id, 1);
    expect(attempt.attributes).toMatchObject({ 'sluice.run.outcome': 'failed', 'error.type': 'TypeError' });
    expect(attempt.status).toEqual({ code: SpanStatusCode.ERROR, message: 'TypeError: f cannot be processed' });
    const [step] = childrenOf(attempt);
    expect(step.name).toBe('step explode');
    expect(step.status).toEqual({ code: SpanStatusCode.ERROR, message: 'TypeError: f cannot be processed' });
    expect(step.attributes['error.type']).toBe('TypeError');
    expect(step.events.map((event) => event.name)).toEqual(['exception']);
  });
});

describe('trace propagation', () => {
  it('makes every attempt of a run a child of the span active at run(), in the same trace', async () => {
    const request = tracer.startSpan('POST /orders', { kind: SpanKind.SERVER });
    const id = 'traced-run';
    const result = await context.with(trace.setSpan(context.active(), request), () =>
      app.client.run(OrderWorkflow, { key: 'traced', failOnce: true }, { id, group: 'tenant-a', timeoutMs: 10_000 }),
    );
    request.end();
    expect(result).toEqual({ reserved: 'reserved-traced', charged: 'charged-traced' });

    const { traceId, spanId } = request.spanContext();
    const stored = JSON.parse((await redis.hget(new RedisKeys('sluice', namespaces[0]).run(id), 'trace'))!);
    expect(stored).toEqual({ traceparent: `00-${traceId}-${spanId}-01` });

    const attempts = await attemptSpans(id, 2);
    for (const attempt of attempts) {
      expect(attempt.spanContext().traceId).toBe(traceId);
      expect(attempt.parentSpanContext?.spanId).toBe(spanId);
      expect(attempt.attributes['sluice.run.group']).toBe('tenant-a');
    }
    expect(childrenOf(attempts[0]).map((span) => span.spanContext().traceId)).toEqual([traceId, traceId]);
  });

  it('carries the context of enqueueMany to each of its runs', async () => {
    const batch = tracer.startSpan('import');
    const handles = await context.with(trace.setSpan(context.active(), batch), () =>
      app.client.enqueueMany(OrderWorkflow, [{ input: { key: 'm1' } }, { input: { key: 'm2' } }]),
    );
    batch.end();
    for (const handle of handles) {
      await handle.result({ timeoutMs: 10_000 });
      const [attempt] = await attemptSpans(handle.id, 1);
      expect(attempt.spanContext().traceId).toBe(batch.spanContext().traceId);
      expect(attempt.parentSpanContext?.spanId).toBe(batch.spanContext().spanId);
    }
  });

  it('stores nothing for an enqueue outside any span', async () => {
    const handle = await app.client.enqueue(OrderWorkflow, { key: 'untraced' });
    await handle.result({ timeoutMs: 10_000 });
    expect(await redis.hexists(new RedisKeys('sluice', namespaces[0]).run(handle.id), 'trace')).toBe(0);
    const [attempt] = await attemptSpans(handle.id, 1);
    expect(attempt.parentSpanContext).toBeUndefined();
  });

  it('stores nothing for an enqueue inside an unsampled span (so it keeps the fast path)', async () => {
    const unsampled = trace.wrapSpanContext({ traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), traceFlags: TraceFlags.NONE });
    const handle = await context.with(trace.setSpan(context.active(), unsampled), () =>
      app.client.enqueue(OrderWorkflow, { key: 'unsampled' }),
    );
    await handle.result({ timeoutMs: 10_000 });
    expect(await redis.hexists(new RedisKeys('sluice', namespaces[0]).run(handle.id), 'trace')).toBe(0);
  });

  it('starts a run claimed by another run’s completion in its own context, not in that run’s', async () => {
    // One slot: the second run waits until the first one's complete call claims it (a refill),
    // from inside the first run's attempt context.
    const single = await startApp({ worker: { concurrency: 1 } });
    try {
      const request = tracer.startSpan('POST /first');
      const first = await context.with(trace.setSpan(context.active(), request), () =>
        single.client.enqueue(OrderWorkflow, { key: 'first', hold: true }),
      );
      request.end();
      await pollUntil(
        () => redis.hget(new RedisKeys('sluice', namespaces.at(-1)!).run(first.id), 'state'),
        (state) => state === 'active',
        'the first run active',
      );
      const second = await single.client.enqueue(OrderWorkflow, { key: 'second' });
      gates.open('first');
      await second.result({ timeoutMs: 10_000 });
      const [attempt] = await attemptSpans(second.id, 1);
      expect(attempt.parentSpanContext).toBeUndefined();
      expect(attempt.spanContext().traceId).not.toBe(request.spanContext().traceId);
    } finally {
      await single.close();
    }
  });
});

describe('claims (Lua)', () => {
  const WF = 'otel.raw';
  const TRACE = JSON.stringify({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' });
  let keys: RedisKeys;
  const reserve = (flags: number, callId = newCallId()) =>
    scriptsOn(redis).run<unknown[]>(
      'reserve',
      [keys.stallGate, keys.call(callId)],
      [keys.base, 10, 30_000, 0, 3, 256, 60_000, 'w', flags, 0, WF],
    );
  const enqueue = async (id: string, trace?: string, group = '', workflow = WF) =>
    enqueueReply(
      await scriptsOn(redis).run<string>(
        'enqueue',
        enqueueKeys(keys, id),
        enqueueArgs(keys, workflow, id, { id }, true, 30_000, false, { nonce: `nonce-${id}`, trace, group }),
      ),
    );

  beforeEach(() => {
    const namespace = uniqueNamespace('otel-raw');
    namespaces.push(namespace);
    keys = new RedisKeys('sluice', namespace);
  });

  it('never fast-paths a run with a trace context, and stores it as the run field trace', async () => {
    await fakePark(redis, keys, WF);
    expect(await enqueue('traced', TRACE)).toEqual([1, 'waiting']);
    expect(await redis.hget(keys.run('traced'), 'trace')).toBe(TRACE);
    // The same conditions without a trace context: the fast path, as before.
    await fakePark(redis, keys, `${WF}.2`);
    expect(await enqueue('untraced', undefined, '', `${WF}.2`)).toEqual([1, 'active']);
    expect(await redis.hexists(keys.run('untraced'), 'trace')).toBe(0);
  });

  it('ships claims as they were without the extras flag (a grouped one with its group), and with it the group, trace and queue wait', async () => {
    await enqueue('plain', TRACE);
    // A claim follows the reply's head, flat: id, workflow, token, attempt, failures, input, time
    // limit ('' for none), group ('' for none), memo length and entries, then the extras if asked for.
    const [, ...plain] = await reserve(0);
    // Not a byte more for a worker without telemetry: no trace, no wait.
    expect(plain).toEqual(['plain', WF, expect.any(String), 1, 0, expect.any(String), '', '', 0]);
    // A grouped run's claim carries its group (the worker holds only ungrouped runs ready).
    await enqueue('grouped', TRACE, 'g1');
    const [, ...grouped] = await reserve(0);
    expect(grouped.slice(6)).toEqual(['', 'g1', 0]);

    await enqueue('extras', TRACE, 'g1');
    await new Promise((resolve) => setTimeout(resolve, 20));
    const callId = newCallId();
    const [, ...claim] = await reserve(2, callId);
    expect(claim).toHaveLength(11);
    expect(claim[0]).toBe('extras');
    expect(claim.slice(6, 10)).toEqual(['', 'g1', 0, TRACE]); // no time limit of its own, its group, no memo, its trace
    expect(claim[10]).toBeGreaterThanOrEqual(15); // ms from due to claim, on the Redis clock

    // The retry of a claiming call gets the same claims back, with the extras but no wait.
    const [, ...replayed] = await reserve(3, callId);
    expect(replayed.slice(6)).toEqual(['', 'g1', 0, TRACE, -1]);
  });

  it('gives a fast-path handoff taken by a claim its wait in the wake list, and no trace', async () => {
    await fakePark(redis, keys, WF);
    expect(await enqueue('handoff')).toEqual([1, 'active']);
    const [, ...claim] = await reserve(2);
    expect(claim[0]).toBe('handoff');
    expect(claim.slice(6, 10)).toEqual(['', '', 0, '']); // no time limit (never handed off with one), no group, no memo, no trace
    expect(claim[10]).toBeGreaterThanOrEqual(0);
  });
});

describe('metrics', () => {
  type Find = (name: string) => MetricData | undefined;
  async function collect(): Promise<Find> {
    metricExporter.reset();
    await reader.forceFlush();
    const exported = metricExporter.getMetrics().at(-1);
    const all = (exported?.scopeMetrics ?? []).filter((scope) => scope.scope.name === 'nest-sluice').flatMap((scope) => scope.metrics);
    return (name) => all.find((metric) => metric.descriptor.name === name);
  }
  /** The value of a counter or gauge (or the count of a histogram) for one workflow (and more attributes). */
  function valueOf(metric: MetricData | undefined, attributes: Record<string, unknown>): number {
    const points = (metric?.dataPoints ?? []).filter((point) =>
      Object.entries(attributes).every(([key, value]) => point.attributes[key] === value),
    );
    return points.reduce(
      (sum, point) =>
        sum + (metric!.dataPointType === DataPointType.HISTOGRAM ? (point.value as { count: number }).count : (point.value as number)),
      0,
    );
  }
  const wf = (workflow: string) => ({ 'sluice.workflow': workflow });

  it('counts attempts and outcomes, measures runs, steps and queue waits, and gauges active runs', async () => {
    // The meter is the process's: the other app's runs count too, so this compares before and after.
    const before = await collect();
    const delta = (find: Find, name: string, attributes: Record<string, unknown>) =>
      valueOf(find(name), attributes) - valueOf(before(name), attributes);
    const order = wf('otel.order');
    const fatal = wf('otel.fatal');

    const ok = await app.client.enqueue(OrderWorkflow, { key: 'ok' });
    const flaky = await app.client.enqueue(OrderWorkflow, { key: 'flaky', failOnce: true });
    const failing = await app.client.enqueue(FatalWorkflow, { key: 'fatal' });
    const held = await app.client.enqueue(OrderWorkflow, { key: 'held', hold: true });
    await ok.result({ timeoutMs: 10_000 });
    await flaky.result({ timeoutMs: 10_000 });
    await expect(failing.result({ timeoutMs: 10_000 })).rejects.toBeInstanceOf(WorkflowFailedError);
    await pollUntil(collect, (find) => valueOf(find(TELEMETRY_METRICS.active), order) === 1, 'the held run gauged active');
    gates.open('held');
    await held.result({ timeoutMs: 10_000 });
    // Outcomes are recorded once committed, and the run leaves the active gauge after that: a
    // waiter in the worker's own app hears of the commit first (the worker tells it, see LocalWaits).
    const find = await pollUntil(
      collect,
      (found) => delta(found, TELEMETRY_METRICS.completed, order) === 3 && valueOf(found(TELEMETRY_METRICS.active), order) === 0,
      'three completions counted, none active',
    );

    expect(valueOf(find(TELEMETRY_METRICS.active), order)).toBe(0);
    expect(
      [TELEMETRY_METRICS.started, TELEMETRY_METRICS.completed, TELEMETRY_METRICS.retried, TELEMETRY_METRICS.failed].map((name) =>
        delta(find, name, order),
      ),
    ).toEqual([4, 3, 1, 0]);
    expect(
      [TELEMETRY_METRICS.started, TELEMETRY_METRICS.completed, TELEMETRY_METRICS.retried, TELEMETRY_METRICS.failed].map((name) =>
        delta(find, name, fatal),
      ),
    ).toEqual([1, 0, 0, 1]);
    // Histograms: a run duration per attempt, by outcome; a queue wait per claim; a step duration per executed step.
    expect(delta(find, TELEMETRY_METRICS.runDuration, order)).toBe(4);
    expect(delta(find, TELEMETRY_METRICS.runDuration, { ...order, 'sluice.run.outcome': 'retry', 'error.type': 'Error' })).toBe(1);
    expect(delta(find, TELEMETRY_METRICS.runDuration, { ...fatal, 'sluice.run.outcome': 'failed', 'error.type': 'TypeError' })).toBe(1);
    expect(delta(find, TELEMETRY_METRICS.queueWait, order)).toBe(4);
    expect(delta(find, TELEMETRY_METRICS.stepDuration, { ...order, 'sluice.step.name': 'reserve' })).toBe(3); // the retry replayed its steps
    expect(delta(find, TELEMETRY_METRICS.stepDuration, { ...fatal, 'sluice.step.name': 'explode', 'error.type': 'TypeError' })).toBe(1);
    for (const name of [TELEMETRY_METRICS.runDuration, TELEMETRY_METRICS.stepDuration, TELEMETRY_METRICS.queueWait])
      expect(find(name)?.descriptor.unit).toBe('s');
  });
});

describe('without telemetry', () => {
  it('emits nothing and stores no trace context with telemetry.enabled false, though the API is there', async () => {
    const off = await startApp({ telemetry: { enabled: false } });
    try {
      const request = tracer.startSpan('POST /quiet');
      const id = 'quiet-run';
      await context.with(trace.setSpan(context.active(), request), () =>
        off.client.run(OrderWorkflow, { key: 'quiet', failOnce: true }, { id, timeoutMs: 10_000 }),
      );
      request.end();
      expect(await redis.hexists(new RedisKeys('sluice', namespaces.at(-1)!).run(id), 'trace')).toBe(0);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(sluiceSpans().filter((span) => span.attributes['sluice.run.id'] === id)).toEqual([]);
    } finally {
      await off.close();
    }
  });

  it('works when @opentelemetry/api cannot be loaded', async () => {
    // A fresh copy of the library (and of Nest) whose require of the API fails, as without the
    // package. The mock stays until the end: the library loads the API lazily, at first use.
    const notInstalled = () => {
      throw Object.assign(new Error("Cannot find module '@opentelemetry/api'"), { code: 'MODULE_NOT_FOUND' });
    };
    let isolated!: {
      lib: typeof import('../../lib');
      support: typeof import('../support/app');
      loader: typeof import('../../lib/telemetry/otel.loader');
    };
    jest.isolateModules(() => {
      jest.doMock('@opentelemetry/api', notInstalled);
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- fresh module instances inside jest.isolateModules need a synchronous require
      isolated = { lib: require('../../lib'), support: require('../support/app'), loader: require('../../lib/telemetry/otel.loader') };
    });
    const namespace = uniqueNamespace('otel-absent');
    namespaces.push(namespace);
    let bare: TestApp | undefined;
    try {
      const { lib, support, loader } = isolated;
      class Bare {
        async run(input: { key: string }, ctx: RunContext) {
          return ctx.step('echo', () => `echo-${input.key}`);
        }
      }
      lib.Workflow('otel.bare')(Bare);
      bare = await support.createApp([Bare], { namespace });
      expect(loader.telemetryApi({ telemetry: { enabled: true } })).toBeUndefined();

      const request = tracer.startSpan('POST /bare');
      const id = 'bare-run';
      const result = await context.with(trace.setSpan(context.active(), request), () =>
        bare!.client.run('otel.bare', { key: 'x' }, { id, timeoutMs: 10_000 }),
      );
      request.end();
      expect(result).toBe('echo-x');
      expect(await redis.hexists(new RedisKeys('sluice', namespace).run(id), 'trace')).toBe(0);
      expect(sluiceSpans().filter((span) => span.attributes['sluice.run.id'] === id)).toEqual([]);
    } finally {
      await bare?.close();
      jest.dontMock('@opentelemetry/api');
    }
  });
});
