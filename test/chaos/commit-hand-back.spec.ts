import { RunContext, Step, Workflow } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { uniqueNamespace } from '../support/app';
import { auditNamespace, expectConsistent } from '../support/audit';
import { appOn, proxiedServer } from '../support/fault';
import { Counter, pollUntil } from '../support/workflows';

/**
 * A run whose own step save keeps failing (its command never gets a reply) while Redis takes
 * everything else: each attempt is handed back without a failure, and delayed — 1 s, then 2 s…
 * (lib/worker/hand-back.ts) — instead of being claimed again at once, which would spin.
 */
jest.setTimeout(120_000);

/** What the step returns: while it holds the proxy's trigger bytes, its save is lost every time. */
const stepResult = { value: '' };
const executed = new Counter();

@Workflow('chb.save', { attempts: 2 })
class SaveWorkflow {
  async run(_input: Record<string, never>, ctx: RunContext): Promise<string> {
    return this.produce(ctx.runId);
  }

  @Step() async produce(runId: string): Promise<string> {
    executed.inc(runId);
    return stepResult.value;
  }
}

describe('a run whose own commits keep failing', () => {
  const redis = proxiedServer();

  it('is handed back uncounted, each time after a longer delay, and completes once its saves land', async () => {
    const ns = uniqueNamespace('chb');
    const keys = new RedisKeys('sluice', ns);
    // Short bounds: a lost save is given up after lockMs (its commit policy), replies wait redisTimeoutMs.
    const worker = await appOn(redis.proxy.url, [SaveWorkflow], {
      namespace: ns,
      redisTimeoutMs: 300,
      worker: { concurrency: 1, lockMs: 2_000, stalledIntervalMs: 60_000 },
    });
    try {
      const marker = `UNSAVABLE-${ns}`;
      stepResult.value = marker;
      redis.proxy.blackholeOn(marker); // every command carrying the step's result is lost, with its connection
      const handle = await worker.client.enqueue(SaveWorkflow, {}, { id: 'r1' });

      const seen: Array<{ state: string; delayMs: number; attempts: number }> = [];
      for (const handbacks of ['1', '2']) {
        const [state, dueAt, attempts, failures] = await pollUntil(
          () => redis.raw.hmget(keys.run('r1'), 'state', 'dueAt', 'attempts', 'failures', 'handbacks'),
          (fields) => fields[4] === handbacks,
          `hand-back ${handbacks}`,
          20_000,
        );
        const [seconds, micros] = await redis.raw.time();
        seen.push({
          state: state!,
          delayMs: Number(dueAt) - (Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)),
          attempts: Number(attempts),
        });
        expect(failures ?? '0').toBe('0'); // a lean record has no `failures` while 0
      }
      // Delayed each time (not due at once), the second time for longer; one attempt per hand-back.
      expect(seen.map(({ state, attempts }) => [state, attempts])).toEqual([
        ['delayed', 1],
        ['delayed', 2],
      ]);
      expect(seen[1].delayMs).toBeGreaterThan(seen[0].delayMs);
      expect(executed.get('r1')).toBe(2);

      // The path is back: the next attempt saves its step and completes, with no failure counted.
      stepResult.value = 'saved';
      redis.proxy.restore({ resetTainted: true });
      expect(await handle.result({ timeoutMs: 30_000 })).toBe('saved');
      expect(await worker.client.get('r1')).toMatchObject({ state: 'completed', attempts: 3, failures: 0 });
      expectConsistent(await auditNamespace(redis.raw, { namespace: ns }));
    } finally {
      redis.proxy.restore({ resetTainted: true });
      await worker.close();
    }
  });
});
