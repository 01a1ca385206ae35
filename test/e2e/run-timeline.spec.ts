import type Redis from 'ioredis';
import { RunContext, Workflow } from '../../lib';
import { parseJournal } from '../../lib/client/run.timeline';
import { AttemptJournal } from '../../lib/execution/attempt.journal';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { Counter } from '../support/workflows';

/**
 * The step timeline (`QueueClient.timeline`): each committed attempt stores when its steps and
 * waits ran and how they ended, with its outcome, in the same script call that commits it.
 */
const effects = new Counter();

/** `b` fails on the first attempt, so attempt 2 replays `a` and runs `b` again. */
@Workflow('tl.retry', { attempts: 3, backoff: { delayMs: 5 } })
class Retried {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.step('a', () => 1);
    await ctx.step('b', () => {
      if (effects.inc(`b:${ctx.runId}`) === 1) throw new Error('b fails once');
      return 2;
    });
    return 'done';
  }
}

/** A step, a sleep that suspends the run, a step. */
@Workflow('tl.sleep', { attempts: 1 })
class Sleeper {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.step('before', () => 1);
    await ctx.sleep('nap', 30);
    await ctx.step('after', () => 2);
  }
}

/** Sleeps 1 ms `naps` times: one attempt per nap, and one more to finish. */
@Workflow('tl.napper', { attempts: 1 })
class Napper {
  async run(input: { naps: number }, ctx: RunContext) {
    for (let i = 0; i < input.naps; i++) await ctx.sleep('nap', 1);
  }
}

/** A step that fails for good. */
@Workflow('tl.fail', { attempts: 1 })
class Failing {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.step('ok', () => 1);
    await ctx.step('boom', () => {
      throw new Error('boom');
    });
  }
}

const summary = (attempt: { calls: Array<{ key: string; status: string }> }) => attempt.calls.map(({ key, status }) => `${key}:${status}`);

describe('run timeline', () => {
  const ns = uniqueNamespace('tl');
  let redis: Redis;
  let app: TestApp;

  beforeAll(async () => {
    redis = rawRedis();
    app = await createApp([Retried, Sleeper, Failing, Napper], { namespace: ns, worker: { concurrency: 4 } });
  });

  afterAll(async () => {
    await app?.close();
    await dropNamespace(redis, ns);
    redis.disconnect();
  });

  it('marks the failed step of a failed attempt and the replayed one of its retry', async () => {
    const handle = await app.client.enqueue(Retried, {});
    await handle.result({ timeoutMs: 10_000 });
    const timeline = (await app.client.timeline(handle.id))!;
    expect(timeline.attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'failed'],
      [2, 'completed'],
    ]);
    expect(summary(timeline.attempts[0])).toEqual(['a#1:ok', 'b#1:failed']);
    expect(summary(timeline.attempts[1])).toEqual(['a#1:replayed', 'b#1:ok']);
    const [first, second] = timeline.attempts;
    expect(first.start).toBeLessThanOrEqual(first.calls[0].start);
    expect(first.calls[1].end).toBeLessThanOrEqual(first.end);
    expect(second.start).toBeGreaterThanOrEqual(first.end);
  });

  it('shows the wait an attempt suspended in, and its replay after the resume', async () => {
    const handle = await app.client.enqueue(Sleeper, {});
    await handle.result({ timeoutMs: 10_000 });
    const timeline = (await app.client.timeline(handle.id))!;
    expect(timeline.attempts.map((a) => a.outcome)).toEqual(['suspended', 'completed']);
    expect(summary(timeline.attempts[0])).toEqual(['before#1:ok', 'nap#1:waiting']);
    expect(timeline.attempts[0].calls[1].kind).toBe('sleep');
    expect(summary(timeline.attempts[1])).toEqual(['before#1:replayed', 'nap#1:replayed', 'after#1:ok']);
  });

  it('keeps a run hash compact: journals go in fields short enough for its listpack encoding', async () => {
    const handle = await app.client.enqueue(Sleeper, {});
    await handle.result({ timeoutMs: 10_000 });
    const key = `{sluice:${ns}}:run:${handle.id}`;
    expect(await redis.object('ENCODING', key)).toBe('listpack');
    const chunks = Object.entries(await redis.hgetall(key)).filter(([field]) => field.startsWith('tl:') && field.includes('.'));
    // Two journals of one chunk each, or more where an attempt's timings took more digits (a busy machine).
    expect(chunks.length).toBeGreaterThanOrEqual(2);
    expect(Math.max(...chunks.map(([, value]) => value.length))).toBeLessThanOrEqual(60);
  });

  it('keeps the journal of a run that failed for good, and answers null for an unknown run', async () => {
    const handle = await app.client.enqueue(Failing, {});
    await expect(handle.result({ timeoutMs: 10_000 })).rejects.toThrow('boom');
    const timeline = (await app.client.timeline(handle.id))!;
    expect(timeline.attempts).toHaveLength(1);
    expect(timeline.attempts[0].outcome).toBe('failed');
    expect(summary(timeline.attempts[0])).toEqual(['ok#1:ok', 'boom#1:failed']);
    expect(await app.client.timeline('no-such-run')).toBeNull();
  });

  it('stores no journal with worker.timeline: false', async () => {
    const quiet = await createApp([Sleeper], { namespace: uniqueNamespace('tl-off'), worker: { timeline: false } });
    try {
      const handle = await quiet.client.enqueue(Sleeper, {});
      await handle.result({ timeoutMs: 10_000 });
      expect((await quiet.client.get(handle.id))!.state).toBe('completed');
      expect(await quiet.client.timeline(handle.id)).toEqual({ attempts: [] });
    } finally {
      await quiet.close();
    }
  });

  it('bounds a journal, replays apart from the calls that ran, and skips what it cannot parse', () => {
    const journal = new AttemptJournal();
    for (let i = 0; i < 500; i++) journal.replayed('step', `step-${i}#1`);
    journal.begin('step', 'ran-after-the-replays#1')('ok');
    journal.begin('step', 'still-running#1');
    const encoded = journal.encode(53, 'failed');
    const [slot, text] = [encoded.slice(0, encoded.indexOf(' ')), encoded.slice(encoded.indexOf(' ') + 1)];
    expect(slot).toBe('3'); // 53 mod 50
    expect(text.length).toBeLessThan(2000);
    const parsed = parseJournal(text)!;
    expect(parsed.attempt).toBe(53);
    expect(parsed.outcome).toBe('failed');
    expect(parsed.calls.length + parsed.more).toBe(502);
    // The replays were cut, not the calls that ran; a step open at the end was interrupted.
    expect(parsed.calls.slice(-2).map(({ key, status }) => `${key}:${status}`)).toEqual([
      'ran-after-the-replays#1:ok',
      'still-running#1:interrupted',
    ]);
    expect(parseJournal('1|abc|2|x|0')).toBeUndefined();
    expect(parseJournal('0|abc|2|c|0')).toBeUndefined();
    expect(parseJournal('not a journal')).toBeUndefined();
    expect(parseJournal('1|abc|2|c|0;xo,0,1,k;so,0,1,k#1;so,zz,1,k')!.calls.map((c) => c.key)).toEqual(['k#1']);
  });

  it('keeps the latest 50 attempts of a run that resumes often, in one field per slot', async () => {
    const handle = await app.client.enqueue(Napper, { naps: 55 });
    await handle.result({ timeoutMs: 30_000 });
    const timeline = (await app.client.timeline(handle.id))!;
    expect(timeline.attempts.map((a) => a.attempt)).toEqual(Array.from({ length: 50 }, (_, i) => i + 7));
    expect(timeline.attempts[49].outcome).toBe('completed');
    const hash = await redis.hgetall(`{sluice:${ns}}:run:${handle.id}`);
    const counts = Object.entries(hash).filter(([field]) => /^tl:\d+$/.test(field));
    expect(counts).toHaveLength(50);
    // Late attempts replay dozens of naps: their journals span several chunks, read back whole above.
    expect(Math.max(...counts.map(([, count]) => Number(count)))).toBeGreaterThan(5);
  });
});
