import Redis from 'ioredis';
import { LeaseUnconfirmedError, RunContext, Step, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { uniqueNamespace } from '../support/app';
import { appOn } from '../support/fault';
import { RedisProcess } from '../support/redis-process';
import { Counter, deferred, Gates } from '../support/workflows';

/**
 * A worker cut off from Redis for longer than its lease, in the middle of a run: Redis frozen
 * (SIGSTOP), so every heartbeat fails. Its lease may lapse meanwhile and the run go to another
 * worker once Redis is back, so the attempt must stop by itself before then — before its next
 * step, which would otherwise run beside the other worker's — and the run must go on afterwards
 * with no failure counted. (Seen in the storm spec's Redis crash: a step executed although its
 * memo had landed, by an attempt that carried on after the outage.)
 */
jest.setTimeout(60_000);

const LOCK_MS = 1_500;
const executions = new Counter();
const gates = new Gates();
const begun = new Gates();
const aborts = new Map<number, ReturnType<typeof deferred<unknown>>>();

@Workflow('lease.cutoff')
class CutOffWorkflow {
  async run(input: { key: string }, ctx: RunContext): Promise<{ first: number; second: number; attempt: number }> {
    const aborted = deferred<unknown>();
    aborts.set(ctx.attempt, aborted);
    ctx.signal.addEventListener('abort', () => aborted.resolve(ctx.signal.reason));
    const first = await this.first(input.key);
    begun.open(`${input.key}#${ctx.attempt}`);
    if (ctx.attempt === 1) await gates.get(input.key).promise;
    const second = await this.second(input.key);
    return { first, second, attempt: ctx.attempt };
  }

  @Step() async first(key: string): Promise<number> {
    return executions.inc(`${key}:first`);
  }

  @Step() async second(key: string): Promise<number> {
    return executions.inc(`${key}:second`);
  }
}

describe('a worker cut off from Redis for longer than its lease', () => {
  let server: RedisProcess;
  let redis: Redis;

  beforeAll(async () => {
    server = await RedisProcess.start();
    redis = new Redis(server.url);
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it('stops its attempt before the lease can lapse; the run carries on after the outage, each step executed once', async () => {
    const ns = uniqueNamespace('cutoff');
    const worker = await appOn(server.url, [CutOffWorkflow], {
      namespace: ns,
      redisTimeoutMs: 500,
      worker: { lockMs: LOCK_MS, stalledIntervalMs: 300 },
    });
    const producer = await appOn(server.url, [], { namespace: ns, worker: { enabled: false } });
    try {
      const run = await producer.client.enqueue(CutOffWorkflow, { key: 'k' });
      await begun.get('k#1').promise;

      await server.kill('SIGSTOP');
      const frozenAt = Date.now();
      let reason: unknown;
      let timer: NodeJS.Timeout | undefined;
      try {
        reason = await Promise.race([
          aborts.get(1)!.promise,
          new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('the attempt was not stopped within 5 s')), 5_000))),
        ]);
      } finally {
        clearTimeout(timer);
        // The attempt then tries its next step: refused at once, it never runs.
        gates.open('k');
        await new Promise((resolve) => setTimeout(resolve, 100));
        await server.kill('SIGCONT');
      }
      expect(reason).toBeInstanceOf(LeaseUnconfirmedError);
      // Within the lease, counted from the last renewal (at most a third of it before the freeze).
      expect(Date.now() - frozenAt).toBeLessThan(LOCK_MS);
      expect(executions.get('k:second')).toBe(0);

      // Handed back once Redis answers (no failure counted), claimed again, the first step replayed.
      expect(await producer.client.wait(run.id, { timeoutMs: 20_000 })).toEqual({ first: 1, second: 1, attempt: 2 });
      expect(executions.get('k:first')).toBe(1);
      expect(executions.get('k:second')).toBe(1);
      const keys = new RedisKeys('sluice', ns);
      expect(await redis.hmget(keys.run(run.id), 'state', 'failures')).toEqual(['completed', null]);
    } finally {
      gates.openAll();
      await producer.close();
      await worker.close();
    }
  });
});
