import { parseReserveReply } from '../../lib/redis/commands/reserve.command';
import 'reflect-metadata';
import { Controller, Injectable, Module, Scope } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import Redis from 'ioredis';
import {
  NonRetryableError,
  OnWorkflowEvent,
  QueueClient,
  QueueModule,
  QueueModuleOptions,
  RunActiveEvent,
  RunEventName,
  RunEvents,
  RunFailedEvent,
  RunOutcomeEvent,
  RunRetryingEvent,
  RunStalledEvent,
  Workflow,
  WorkflowDefinitionError,
} from '../../lib';
import { newCallId } from '../../lib/redis/commands/call-id';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { dropNamespace, rawRedis, testConnection, uniqueNamespace } from '../support/app';
import { LogCapture } from '../support/log-capture';
import { scriptsOn } from '../support/scripts';
import { deferred, Deferred, pollUntil } from '../support/workflows';

/**
 * `@OnWorkflowEvent` handlers on ordinary providers (here in a feature module of their own),
 * discovered at bootstrap, beside `RunEvents`: every event kind with its payload, the workflow
 * filter, handlers that throw or reject, and the logging that goes with run outcomes.
 */

@Workflow('ev.ok')
class OkWorkflow {
  async run(input: { n: number }) {
    return input.n * 2;
  }
}

/** Fails its first attempt, then succeeds. */
@Workflow('ev.flaky', { attempts: 3, backoff: { delayMs: 0 } })
class FlakyWorkflow {
  async run(_input: { key: string }, ctx: { attempt: number }) {
    if (ctx.attempt === 1) throw new TypeError('first attempt fails');
    return 'second time lucky';
  }
}

/** The same, under another name: the filtered handlers must not hear it. */
@Workflow('ev.flaky-other', { attempts: 3, backoff: { delayMs: 0 } })
class OtherFlakyWorkflow {
  async run(_input: { key: string }, ctx: { attempt: number }) {
    if (ctx.attempt === 1) throw new Error('first attempt fails');
    return 'other';
  }
}

@Workflow('ev.doomed', { attempts: 5 })
class DoomedWorkflow {
  async run(): Promise<never> {
    throw new NonRetryableError('never works');
  }
}

type Heard = { event: RunEventName; payload: { runId: string } & Record<string, unknown> };

/** Records what each handler hears; `next(match)` resolves when a matching event arrives. */
class Recorder {
  readonly heard: Array<Heard & { handler: string }> = [];
  private readonly waiting: Array<{ match: (h: Heard & { handler: string }) => boolean; done: Deferred<Heard> }> = [];

  add(handler: string, event: RunEventName, payload: Heard['payload']): void {
    const heard = { handler, event, payload };
    this.heard.push(heard);
    for (const w of [...this.waiting]) {
      if (w.match(heard)) {
        this.waiting.splice(this.waiting.indexOf(w), 1);
        w.done.resolve(heard);
      }
    }
  }

  /** Resolves with the first event (already heard, or to come) matching. */
  next(match: (h: Heard & { handler: string }) => boolean): Promise<Heard> {
    const seen = this.heard.find(match);
    if (seen) return Promise.resolve(seen);
    const done = deferred<Heard>();
    this.waiting.push({ match, done });
    return done.promise;
  }

  of(handler: string, runId: string): string[] {
    return this.heard.filter((h) => h.handler === handler && h.payload.runId === runId).map((h) => h.event);
  }
}

const recorder = new Recorder();

@Injectable()
class RunObserver {
  // First on purpose: the handlers after it must still run.
  @OnWorkflowEvent('completed')
  explodes(): void {
    throw new RangeError('handler bug');
  }

  @OnWorkflowEvent('completed')
  async rejects(): Promise<void> {
    throw new Error('async handler bug');
  }

  @OnWorkflowEvent('active')
  onActive(event: RunActiveEvent): void {
    recorder.add('all', 'active', { ...event });
  }

  @OnWorkflowEvent('completed')
  @OnWorkflowEvent('failed')
  onOutcome(event: RunOutcomeEvent | RunFailedEvent): void {
    recorder.add('all', 'error' in event ? 'failed' : 'completed', { ...event });
  }

  @OnWorkflowEvent('retrying')
  onRetrying(event: RunRetryingEvent): void {
    recorder.add('all', 'retrying', { ...event });
  }

  @OnWorkflowEvent('stalled')
  onStalled(event: RunStalledEvent): void {
    recorder.add('all', 'stalled', { ...event });
  }

  @OnWorkflowEvent('retrying', { workflow: 'ev.flaky' })
  @OnWorkflowEvent('completed', { workflow: ['ev.flaky', 'ev.ok'] })
  onlyFlakyAndOk(event: RunOutcomeEvent): void {
    recorder.add('filtered', 'error' in event ? 'retrying' : 'completed', { ...event });
  }
}

@Module({ providers: [RunObserver] })
class ObserverModule {}

async function boot(
  providers: unknown[],
  options: Partial<QueueModuleOptions> & { namespace: string },
  imports: unknown[] = [ObserverModule],
) {
  const logs = new LogCapture();
  const app: TestingModule = await Test.createTestingModule({
    imports: [QueueModule.forRoot({ connection: testConnection(), ...options }), ...(imports as never[])],
    providers: providers as never[],
  }).compile();
  app.useLogger(logs);
  await app.init();
  return { app, logs, client: app.get(QueueClient) };
}

describe('@OnWorkflowEvent', () => {
  const namespaces: string[] = [];
  const apps: TestingModule[] = [];
  let redis: Redis;

  beforeAll(() => {
    redis = rawRedis();
  });

  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });

  afterAll(async () => {
    for (const ns of namespaces) await dropNamespace(redis, ns);
    await redis.quit();
  });

  async function start(
    options: Partial<QueueModuleOptions> = {},
    providers: unknown[] = [OkWorkflow, FlakyWorkflow, OtherFlakyWorkflow, DoomedWorkflow],
  ) {
    const namespace = uniqueNamespace('events');
    namespaces.push(namespace);
    const booted = await boot(providers, { namespace, ...options });
    apps.push(booted.app);
    return { ...booted, namespace };
  }

  it('hears active then completed with typed payloads; a handler that throws or rejects is logged by name and the others still run', async () => {
    const { client, logs } = await start();
    const handle = await client.enqueue(OkWorkflow, { n: 21 });
    expect(await handle.result({ timeoutMs: 10_000 })).toBe(42);
    const completed = await recorder.next((h) => h.handler === 'all' && h.event === 'completed' && h.payload.runId === handle.id);

    expect(recorder.of('all', handle.id)).toEqual(['active', 'completed']);
    expect(recorder.heard.find((h) => h.event === 'active' && h.payload.runId === handle.id)!.payload).toEqual({
      runId: handle.id,
      workflow: 'ev.ok',
      attempt: 1,
    });
    expect(completed.payload).toEqual({ runId: handle.id, workflow: 'ev.ok', attempt: 1, durationMs: expect.any(Number) });
    // The filtered handler takes ev.ok completions.
    expect(recorder.of('filtered', handle.id)).toEqual(['completed']);

    expect(
      logs.find('warn', /The @OnWorkflowEvent\('completed'\) handler RunObserver\.explodes failed, ignored: RangeError: handler bug/),
    ).toHaveLength(1);
    await pollUntil(
      async () => logs.find('warn', 'RunObserver.rejects failed, ignored: Error: async handler bug').length,
      (n) => n === 1,
      'the async handler rejection to be logged',
    );
    expect(logs.find('warn', 'handler').every((line) => line.context === 'Sluice')).toBe(true);
    // The run itself is untouched by its handlers' failures.
    expect(await client.get(handle.id)).toMatchObject({ state: 'completed', result: 42 });
  });

  it('reports a retried attempt as failed (willRetry) then retrying (with its backoff), and filters by workflow name', async () => {
    const { client, logs } = await start();
    const flaky = await client.enqueue(FlakyWorkflow, { key: 'a' });
    const other = await client.enqueue(OtherFlakyWorkflow, { key: 'b' });
    await Promise.all([flaky.result({ timeoutMs: 10_000 }), other.result({ timeoutMs: 10_000 })]);
    await recorder.next((h) => h.handler === 'all' && h.event === 'completed' && h.payload.runId === flaky.id);
    await recorder.next((h) => h.handler === 'all' && h.event === 'completed' && h.payload.runId === other.id);

    expect(recorder.of('all', flaky.id)).toEqual(['active', 'failed', 'retrying', 'active', 'completed']);
    const failed = recorder.heard.find((h) => h.handler === 'all' && h.event === 'failed' && h.payload.runId === flaky.id)!.payload;
    expect(failed).toEqual({
      runId: flaky.id,
      workflow: 'ev.flaky',
      attempt: 1,
      durationMs: expect.any(Number),
      error: { name: 'TypeError', message: 'first attempt fails' },
      willRetry: true,
    });
    const retrying = recorder.heard.find((h) => h.handler === 'all' && h.event === 'retrying' && h.payload.runId === flaky.id)!.payload;
    expect(retrying).toEqual({ ...failed, durationMs: expect.any(Number), willRetry: true, delayMs: 0 });

    // The same events of ev.flaky-other were emitted (the unfiltered handler heard them) but
    // never reached the handler filtered to ev.flaky and ev.ok.
    expect(recorder.of('all', other.id)).toEqual(['active', 'failed', 'retrying', 'active', 'completed']);
    expect(recorder.of('filtered', other.id)).toEqual([]);
    expect(recorder.of('filtered', flaky.id)).toEqual(['retrying', 'completed']);

    // logging.attemptFailed defaults to 'warn': one line per retried attempt, none "for good".
    expect(
      logs.find('warn', new RegExp(`Run ${flaky.id} \\(ev.flaky\\) attempt 1 failed: TypeError: first attempt fails; retrying in 0 ms`)),
    ).toHaveLength(1);
    expect(logs.find('warn', 'failed for good')).toHaveLength(0);
  });

  it('reports a run that failed for good once, willRetry false, with a warning (not an error) and no retrying event', async () => {
    const { client, logs } = await start();
    const handle = await client.enqueue(DoomedWorkflow, {});
    await expect(handle.result({ timeoutMs: 10_000 })).rejects.toThrow('never works');
    const failed = await recorder.next((h) => h.handler === 'all' && h.event === 'failed' && h.payload.runId === handle.id);
    expect(failed.payload).toMatchObject({ attempt: 1, willRetry: false, error: { name: 'NonRetryableError', message: 'never works' } });
    expect(recorder.of('all', handle.id)).toEqual(['active', 'failed']);
    expect(
      logs.find('warn', `Run ${handle.id} (ev.doomed) attempt 1 failed: NonRetryableError: never works; failed for good (not retryable)`),
    ).toHaveLength(1);
    expect(logs.find('error', handle.id)).toHaveLength(0);
  });

  it('logging.attemptFailed: "debug" moves retried attempts to debug, false drops them; successful runs log nothing', async () => {
    for (const attemptFailed of ['debug', false] as const) {
      const { client, logs } = await start({ logging: { attemptFailed } });
      const mark = logs.mark();
      const flaky = await client.enqueue(FlakyWorkflow, { key: 'quiet' });
      const oks = await Promise.all([1, 2, 3].map((n) => client.enqueue(OkWorkflow, { n })));
      await flaky.result({ timeoutMs: 10_000 });
      await Promise.all(oks.map((h) => h.result({ timeoutMs: 10_000 })));
      await recorder.next((h) => h.handler === 'all' && h.event === 'completed' && h.payload.runId === flaky.id);
      const sluice = logs.lines.slice(mark).filter((line) => line.context === 'Sluice' && !/handler RunObserver/.test(line.message));
      // Nothing at all per run at log/warn/error level: the retried attempt only at debug, or nowhere.
      expect(sluice.filter((line) => line.level !== 'debug')).toEqual([]);
      expect(
        sluice.filter((line) => line.level === 'debug' && line.message.includes(`Run ${flaky.id} (ev.flaky) attempt 1 failed`)),
      ).toHaveLength(attemptFailed ? 1 : 0);
    }
  });

  it("reports the runs its stalled scan recovered: 'stalled' (requeued, or failed for good past maxStalls) and one warning per scan", async () => {
    const namespace = uniqueNamespace('stalls');
    namespaces.push(namespace);
    const keys = new RedisKeys('sluice', namespace);
    // A producer enqueues; a "worker" that then dies claims both runs with a 50 ms lease.
    const producer = await boot([], { namespace, worker: { enabled: false } }, []);
    apps.push(producer.app);
    const alive = await producer.client.enqueue(OkWorkflow, { n: 5 });
    const doomed = await producer.client.enqueue(OkWorkflow, { n: 6 });
    const scripts = scriptsOn(redis);
    const reply = await scripts.run<unknown[]>(
      'reserve',
      [keys.stallGate, keys.call(newCallId())],
      [keys.base, 2, 50, 0, 3, 256, 60_000, 'dead-worker', 0, 0, 'ev.ok'],
    );
    expect(parseReserveReply(reply).claims).toHaveLength(2);
    // One of them has stalled before: this stall is one too many (maxStalls 1).
    await redis.hset(keys.run(doomed.id), 'stalls', 1);

    const worker = await boot([OkWorkflow], { namespace, worker: { lockMs: 2_000, stalledIntervalMs: 200, maxStalls: 1 } });
    apps.push(worker.app);
    const { logs } = worker;
    expect(await alive.result({ timeoutMs: 10_000 })).toBe(10);
    await expect(doomed.result({ timeoutMs: 10_000 })).rejects.toThrow('StalledError');
    const stalledAlive = await recorder.next((h) => h.event === 'stalled' && h.payload.runId === alive.id);
    const stalledDoomed = await recorder.next((h) => h.event === 'stalled' && h.payload.runId === doomed.id);
    expect(stalledAlive.payload).toEqual({ runId: alive.id, workflow: 'ev.ok', stalls: 1, requeued: true });
    expect(stalledDoomed.payload).toEqual({ runId: doomed.id, workflow: 'ev.ok', stalls: 2, requeued: false });
    // The recovered run's next attempt is an ordinary one; the failed one gets no 'failed' event
    // (no attempt of this process failed).
    expect(recorder.of('all', alive.id)).toEqual(['stalled', 'active', 'completed']);
    expect(recorder.of('all', doomed.id)).toEqual(['stalled']);
    const warnings = logs.find('warn', 'Recovered 2 stalled run(s)');
    expect(warnings).toHaveLength(1);
    expect(warnings[0].message).toContain(`1 requeued: ${alive.id} (ev.ok)`);
    expect(warnings[0].message).toContain(`1 failed for good (stalled more than maxStalls times): ${doomed.id} (ev.ok)`);
  });

  it('hears handlers declared on a controller too', async () => {
    const heard: string[] = [];
    @Controller()
    class EventsController {
      @OnWorkflowEvent('completed', { workflow: 'ev.ok' })
      onCompleted(event: RunOutcomeEvent) {
        heard.push(event.runId);
      }
    }
    const namespace = uniqueNamespace('events-ctl');
    namespaces.push(namespace);
    const app = await Test.createTestingModule({
      imports: [QueueModule.forRoot({ connection: testConnection(), namespace })],
      providers: [OkWorkflow],
      controllers: [EventsController],
    }).compile();
    app.useLogger(false);
    await app.init();
    apps.push(app);
    const handle = await app.get(QueueClient).enqueue(OkWorkflow, { n: 2 });
    await handle.result({ timeoutMs: 10_000 });
    await pollUntil(
      async () => heard,
      (ids) => ids.includes(handle.id),
      'the controller handler',
    );
  });

  it('is the same stream as RunEvents.on, added before the worker starts', async () => {
    const { app, client } = await start();
    const direct: string[] = [];
    app.get(RunEvents).on('active', (event) => direct.push(event.runId));
    const handle = await client.enqueue(OkWorkflow, { n: 1 });
    await handle.result({ timeoutMs: 10_000 });
    await recorder.next((h) => h.event === 'completed' && h.payload.runId === handle.id);
    expect(direct).toEqual([handle.id]);
  });

  it('fails the bootstrap for a handler on a request-scoped provider, naming it', async () => {
    @Injectable({ scope: Scope.REQUEST })
    class PerRequest {
      @OnWorkflowEvent('completed')
      onCompleted(): void {}
    }
    const namespace = uniqueNamespace('events');
    await expect(boot([PerRequest], { namespace, worker: { enabled: false } }, [])).rejects.toThrow(
      new WorkflowDefinitionError(
        '@OnWorkflowEvent on PerRequest.onCompleted: the provider must be a singleton (request- or transient-scoped providers are not supported)',
      ),
    );
  });

  it('warns at bootstrap about a filter naming a workflow this worker does not run', async () => {
    @Injectable()
    class Typo {
      @OnWorkflowEvent('failed', { workflow: ['ev.ok', 'ev.okk'] })
      onFailed(): void {}
    }
    const namespace = uniqueNamespace('events');
    const { app, logs } = await boot([OkWorkflow, Typo], { namespace }, []);
    apps.push(app);
    const lines = logs.find('warn', '@OnWorkflowEvent');
    expect(lines.map((line) => line.message)).toEqual([
      `@OnWorkflowEvent('failed') on Typo.onFailed filters on "ev.okk", which this app's worker does not run: it only hears this process's runs`,
    ]);
  });
});
