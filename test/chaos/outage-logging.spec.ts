import 'reflect-metadata';
import { Test } from '@nestjs/testing';
import Redis from 'ioredis';
import { QueueClient, QueueHealth, QueueModule, RunContext, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { uniqueNamespace } from '../support/app';
import { LogCapture } from '../support/log-capture';
import { RedisProcess } from '../support/redis-process';
import { pollUntil } from '../support/workflows';

/**
 * What a Redis outage prints. A user reported "Redis down for 45 s printed 61 WARN lines": one
 * per connection error, loop failure and heartbeat every 30 s, and one per run in flight handed
 * back. Now an outage is a handful of lines — each connection's "down" once and "back" once (at
 * log level), the worker loop and the heartbeat once each, one line for all the runs it cost —
 * however many runs were in flight.
 */
jest.setTimeout(120_000);

let released = false;

/** Persists a step every 100 ms until released, so its runs are mid-flight when Redis dies. */
@Workflow('noise.ticker', { attempts: 5, backoff: { delayMs: 0 } })
class TickerWorkflow {
  async run(input: { key: string }, ctx: RunContext) {
    for (let i = 0; !released; i++) {
      await ctx.step(`tick${i}`, async () => i);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return input.key;
  }
}

const RUNS = 6;
const OUTAGE_MS = 10_000;

describe('logging during a Redis outage', () => {
  let server: RedisProcess;

  beforeAll(async () => {
    server = await RedisProcess.start({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
  });

  afterAll(async () => {
    released = true;
    await server?.stop();
  });

  it(`a ${OUTAGE_MS / 1000} s outage with ${RUNS} runs in flight and a pending wait logs a handful of WARN lines, and says when each connection is back`, async () => {
    const logs = new LogCapture();
    const namespace = uniqueNamespace('noise');
    const app = await Test.createTestingModule({
      imports: [
        QueueModule.forRoot({
          connection: { url: server.url },
          namespace,
          redisTimeoutMs: 1_000,
          worker: { concurrency: RUNS, lockMs: 4_000, stalledIntervalMs: 1_000 },
        }),
      ],
      providers: [TickerWorkflow],
    }).compile();
    app.useLogger(logs);
    await app.init();
    const client = app.get(QueueClient);
    try {
      const handles = await Promise.all(Array.from({ length: RUNS }, (_, i) => client.enqueue(TickerWorkflow, { key: `k${i}` })));
      // A wait, so the subscriber connection is open too (all three connections go through it).
      const results = Promise.all(handles.map((handle) => handle.result({ timeoutMs: 90_000 })));
      results.catch(() => undefined);
      await pollUntil(
        () => Promise.all(handles.map((h) => client.get(h.id))),
        (runs) => runs.every((run) => run?.state === 'active'),
        'every run active',
      );
      // Each wait's first read is in (it marks the run waited on): a wait whose first read finds
      // Redis gone fails at once by design, and this test is about waits already established.
      const keys = new RedisKeys('sluice', namespace);
      const admin = new Redis(server.url);
      try {
        await pollUntil(
          () => Promise.all(handles.map((h) => admin.hget(keys.run(h.id), 'waited'))),
          (flags) => flags.every((flag) => flag !== null),
          'every wait past its first read',
        );
      } finally {
        admin.disconnect();
      }

      const mark = logs.mark();
      await server.kill('SIGKILL');
      // The outage itself: its length is the fault, not a wait for an event.
      await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
      await server.restart();
      await pollUntil(
        () => app.get(QueueHealth).check(1_000),
        (report) => report.healthy,
        'a healthy worker again',
        30_000,
      );
      released = true;
      expect(await results).toEqual(handles.map((_, i) => `k${i}`));

      const during = logs.lines.slice(mark).filter((line) => line.context === 'Sluice');
      const describe = () => during.map((line) => `${line.level}: ${line.message}`).join('\n');
      const warns = during.filter((line) => line.level === 'warn');
      const errors = during.filter((line) => line.level === 'error');
      // Each connection: "down" once. The loop, the heartbeat, the runs it cost: once each. The
      // stalled scans that recover the runs whose leases ran out: a line each (one or two scans).
      // (On failure, the received value is every line the outage printed.)
      expect(warns.length <= 8 && errors.length <= 1 ? 'a handful' : describe()).toBe('a handful');
      for (const role of ['command', 'blocking', 'subscriber']) {
        expect([role, logs.find('warn', `Redis ${role} connection down`, mark).length]).toEqual([role, 1]);
        expect([role, logs.find('log', new RegExp(`^Redis ${role} connection back after \\d+\\.\\d s`), mark).length]).toEqual([role, 1]);
      }
      expect(logs.find('warn', 'Worker loop:', mark)).toHaveLength(1);
      expect(logs.find('log', /^Worker loop recovered after/, mark)).toHaveLength(1);
    } finally {
      released = true;
      await app.close();
    }
  });
});
