import { OutcomeUnknownError } from '../../lib/errors';
import { PendingWait } from '../../lib/client/pending.wait';
import { RunInbox } from '../../lib/client/run.inbox';
import type { LocalWaits } from '../../lib/interfaces/local.waits';
import { resolveQueueOptions } from '../../lib/interfaces/queue.options';
import type { Claim } from '../../lib/redis/commands/claim.reply';
import type { LuaScripts } from '../../lib/redis/lua.scripts';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { LOCAL_WAITS_MIN_TTL_MS, RunCommits } from '../../lib/worker/run.commits';

/** LocalWaits between a worker's commits and its app's run() waits (RunInbox, PendingWait), without Redis. */
const keys = new RedisKeys('sluice', 'unit');

function claim(id: string): Claim {
  return { id, workflow: 'wf', token: '1', attempt: 1, failures: 0, input: '', steps: new Map() };
}

/** A wait on `runId` in `inbox`, as RunWaiter.waitOnInbox makes it; `reads` counts its record reads. */
function waitOn(inbox: RunInbox, runId: string) {
  let reads = 0;
  const settled = new Promise<unknown>((resolve, reject) => {
    const wait = new PendingWait(
      runId,
      undefined,
      {
        read: async () => (reads++, { settled: true, result: 'from the record' }),
        deliveredSoFar: async () => undefined,
      },
      resolve,
      reject,
    );
    inbox.add(runId, wait.onMessage);
    wait.onSettle(() => inbox.remove(runId, wait.onMessage));
  });
  return { settled, reads: () => reads };
}

describe('LocalWaits', () => {
  it("RunInbox.completed gives a run's waits the value its announcement carries; unsure has them read the record", async () => {
    const inbox = new RunInbox(keys);
    const object = waitOn(inbox, 'a');
    const nothing = waitOn(inbox, 'b');
    const unsure = waitOn(inbox, 'c');
    inbox.completed('a', 'wf', '{"n":[1,2],"at":"2026-01-01T00:00:00.000Z"}');
    inbox.completed('b', 'wf', '');
    inbox.completed('elsewhere', 'wf', '1'); // no wait on it: nothing happens
    inbox.unsure(['c']);
    await expect(object.settled).resolves.toEqual({ n: [1, 2], at: '2026-01-01T00:00:00.000Z' });
    await expect(nothing.settled).resolves.toBeUndefined();
    await expect(unsure.settled).resolves.toBe('from the record');
    expect([object.reads(), nothing.reads(), unsure.reads()]).toEqual([0, 0, 1]);
  });

  describe('RunCommits', () => {
    const told: string[] = [];
    const local: LocalWaits = {
      id: 'inbox-id',
      completed: (runId, workflow, encoded) => told.push(`completed ${runId} ${workflow} ${encoded}`),
      unsure: (runIds) => told.push(`unsure ${runIds.join(',')}`),
    };
    const refill = { take: () => ({ ticket: 0, count: 0, workflows: [] }), settle: () => undefined };
    /** RunCommits over scripts that answer (or fail) every complete call as `answer` says; resolves the arguments each call sent. */
    function commits(answer: () => Promise<unknown>, resultTtlMs = LOCAL_WAITS_MIN_TTL_MS) {
      const sent: unknown[][] = [];
      const scripts = {
        run: (_name: string, _keys: string[], args: unknown[] | ((retry: boolean) => unknown[])) => {
          sent.push(typeof args === 'function' ? args(false) : args);
          return answer();
        },
      } as unknown as LuaScripts;
      const options = resolveQueueOptions({ connection: { url: 'redis://127.0.0.1:1' }, defaults: { resultTtlMs } });
      return { commits: new RunCommits(scripts, keys, options, refill, { localWaits: local }), sent };
    }
    beforeEach(() => void (told.length = 0));

    it('names the inbox in the call and tells the waits of the runs it committed, not of those whose lease was lost', async () => {
      const { commits: c, sent } = commits(async () => '0 2 1 0 0');
      await expect(Promise.all([c.complete(claim('r1'), '"one"'), c.complete(claim('r2'), '"two"')])).resolves.toEqual([true, false]);
      expect(sent[0][7]).toBe('inbox-id');
      expect(told).toEqual(['completed r1 wf "one"']);
    });

    it('has the waits read their records when the call fails (it may have run)', async () => {
      const { commits: c } = commits(() => Promise.reject(new OutcomeUnknownError('complete', 'reply lost')));
      await expect(c.complete(claim('r1'), '"one"')).rejects.toBeInstanceOf(OutcomeUnknownError);
      expect(told).toEqual(['unsure r1']);
    });

    it('names no inbox when results are kept less than LOCAL_WAITS_MIN_TTL_MS, and still tells the waits', async () => {
      const { commits: c, sent } = commits(async () => '0 1 1 0', LOCAL_WAITS_MIN_TTL_MS - 1);
      await expect(c.complete(claim('r1'), '"one"')).resolves.toBe(true);
      expect(sent[0][7]).toBe('');
      expect(told).toEqual(['completed r1 wf "one"']);
    });
  });
});
