import { MAX_PROGRESS_BYTES, PayloadNotSerializableError, PayloadTooLargeError } from '../../lib';
import { ProgressFeed } from '../../lib/client/progress.feed';
import { encodeProgress, parseProgressMessage } from '../../lib/redis/progress.codec';
import { PROGRESS_INTERVAL_MS, ProgressReporter } from '../../lib/worker/progress.reporter';
import { deferred, Deferred } from '../support/workflows';

/** A write the test settles itself, recording what was sent. */
class FakeWrites {
  readonly sent: string[] = [];
  readonly replies: Deferred<boolean>[] = [];
  readonly write = (encoded: string): Promise<boolean> => {
    this.sent.push(encoded);
    const reply = deferred<boolean>();
    this.replies.push(reply);
    return reply.promise;
  };
}

/** Lets the promise callbacks queued so far run (fake timers do not touch microtasks). */
const drain = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe('encodeProgress', () => {
  it('encodes JSON values and refuses undefined, non-JSON values and oversize values with typed errors', () => {
    expect(encodeProgress({ done: 1, of: 2 }, 1 << 20)).toBe('{"done":1,"of":2}');
    expect(encodeProgress(null, 1 << 20)).toBe('null');
    expect(() => encodeProgress(undefined, 1 << 20)).toThrow(PayloadNotSerializableError);
    expect(() => encodeProgress({ fn: () => 1 }, 1 << 20)).toThrow(PayloadNotSerializableError);
    expect(() => encodeProgress(new WeakMap(), 1 << 20)).toThrow(/progress: a WeakMap/);
    const big = 'x'.repeat(MAX_PROGRESS_BYTES); // + 2 quotes
    expect(() => encodeProgress(big, 1 << 20)).toThrow(PayloadTooLargeError);
    expect(() => encodeProgress(big, 1 << 20)).toThrow(/MAX_PROGRESS_BYTES/);
    expect(encodeProgress('x'.repeat(MAX_PROGRESS_BYTES - 2), 1 << 20)).toHaveLength(MAX_PROGRESS_BYTES);
    // A smaller maxPayloadBytes bounds progress too, and the error names it.
    expect(() => encodeProgress('x'.repeat(100), 50)).toThrow(/maxPayloadBytes/);
  });
});

describe('parseProgressMessage', () => {
  it('reads a rich progress value out of the message progress.lua builds around it', () => {
    const value = { n: 10n, at: new Date(0), seen: new Set(['a']) };
    const message = `{"v":1,"seq":3,"value":${encodeProgress(value, 1 << 20)}}`;
    expect(parseProgressMessage(message)).toEqual({ v: 1, seq: 3, value });
    expect(parseProgressMessage(`{"v":1,"seq":4,"value":{"done":1}}`)).toEqual({ v: 1, seq: 4, value: { done: 1 } });
  });
});

describe('ProgressReporter', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('sets no timer before its first call, and collapses the calls of one turn into one write of the last value', async () => {
    const writes = new FakeWrites();
    const reporter = new ProgressReporter(writes.write, 1 << 20, () => undefined);
    expect(jest.getTimerCount()).toBe(0);
    const settled: number[] = [];
    for (let i = 1; i <= 100; i++) void reporter.report(i).then(() => settled.push(i));
    expect(writes.sent).toEqual([]);
    jest.advanceTimersByTime(0);
    expect(writes.sent).toEqual(['100']);
    await drain();
    expect(settled).toEqual([]); // resolved only once written
    writes.replies[0].resolve(true);
    await drain();
    expect(settled).toHaveLength(100);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('writes at most once per interval, one at a time, the latest value winning', async () => {
    const writes = new FakeWrites();
    const reporter = new ProgressReporter(writes.write, 1 << 20, () => undefined);
    void reporter.report('a');
    jest.advanceTimersByTime(0);
    expect(writes.sent).toEqual(['"a"']);
    const b = reporter.report('b');
    const c = reporter.report('c');
    // The first write is still in flight: nothing more goes out, however long it takes.
    jest.advanceTimersByTime(PROGRESS_INTERVAL_MS * 2);
    expect(writes.sent).toHaveLength(1);
    writes.replies[0].resolve(true);
    await drain();
    jest.advanceTimersByTime(0); // its interval has passed: the trailing write goes at once
    expect(writes.sent).toEqual(['"a"', '"c"']);
    writes.replies[1].resolve(true);
    await expect(Promise.all([b, c])).resolves.toEqual([undefined, undefined]);

    // A value right after a quick write waits for the rest of the interval.
    void reporter.report('d');
    jest.advanceTimersByTime(PROGRESS_INTERVAL_MS - 1);
    expect(writes.sent).toHaveLength(2);
    jest.advanceTimersByTime(1);
    expect(writes.sent).toEqual(['"a"', '"c"', '"d"']);
  });

  it('rejects a bad value before any write, and keeps going', async () => {
    const writes = new FakeWrites();
    const reporter = new ProgressReporter(writes.write, 1 << 20, () => undefined);
    await expect(reporter.report(() => 1)).rejects.toThrow(PayloadNotSerializableError);
    await expect(reporter.report('y'.repeat(MAX_PROGRESS_BYTES))).rejects.toThrow(PayloadTooLargeError);
    jest.advanceTimersByTime(PROGRESS_INTERVAL_MS);
    expect(writes.sent).toEqual([]);
    void reporter.report(1);
    jest.advanceTimersByTime(0);
    expect(writes.sent).toEqual(['1']);
  });

  it('a failed write is reported and resolves; later values are still written', async () => {
    const writes = new FakeWrites();
    const errors: unknown[] = [];
    const reporter = new ProgressReporter(writes.write, 1 << 20, (error) => errors.push(error));
    const first = reporter.report(1);
    jest.advanceTimersByTime(0);
    writes.replies[0].reject(new Error('redis away'));
    await expect(first).resolves.toBeUndefined();
    expect(errors).toEqual([new Error('redis away')]);
    void reporter.report(2);
    jest.advanceTimersByTime(PROGRESS_INTERVAL_MS);
    expect(writes.sent).toEqual(['1', '2']);
  });

  it('a lost lease stops it: the waiting value is dropped, later calls resolve without writing', async () => {
    const writes = new FakeWrites();
    const reporter = new ProgressReporter(writes.write, 1 << 20, () => undefined);
    void reporter.report(1);
    jest.advanceTimersByTime(0);
    const waiting = reporter.report(2);
    writes.replies[0].resolve(false);
    await expect(waiting).resolves.toBeUndefined();
    await expect(reporter.report(3)).resolves.toBeUndefined();
    jest.advanceTimersByTime(PROGRESS_INTERVAL_MS * 4);
    expect(writes.sent).toEqual(['1']);
    // Bad values are still refused: the same contract whatever the lease.
    await expect(reporter.report(undefined)).rejects.toThrow(PayloadNotSerializableError);
  });

  it('end() sends the waiting value at once, then writes nothing more', async () => {
    const writes = new FakeWrites();
    const reporter = new ProgressReporter(writes.write, 1 << 20, () => undefined);
    void reporter.report(1);
    jest.advanceTimersByTime(0);
    writes.replies[0].resolve(true);
    await drain();
    const last = reporter.report(2); // waits for its slot…
    expect(writes.sent).toEqual(['1']);
    reporter.end(); // …but the attempt ends: sent now
    expect(writes.sent).toEqual(['1', '2']);
    writes.replies[1].resolve(true);
    await expect(last).resolves.toBeUndefined();
    await expect(reporter.report(3)).resolves.toBeUndefined();
    jest.advanceTimersByTime(PROGRESS_INTERVAL_MS * 4);
    expect(writes.sent).toEqual(['1', '2']);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('end() with nothing waiting writes nothing', () => {
    const writes = new FakeWrites();
    const reporter = new ProgressReporter(writes.write, 1 << 20, () => undefined);
    reporter.end();
    expect(writes.sent).toEqual([]);
  });
});

describe('ProgressFeed', () => {
  const message = (seq: number, value: unknown) => JSON.stringify({ v: 1, seq, value });

  it('hands over the stored value first, then held and later messages that are newer, in order, once each', () => {
    const seen: unknown[] = [];
    const feed = new ProgressFeed((value) => seen.push(value));
    feed.onMessage(message(3, 'c')); // arrived before the read's reply
    feed.onMessage(message(4, 'd'));
    expect(seen).toEqual([]);
    feed.read('"c"', '3');
    expect(seen).toEqual(['c', 'd']);
    feed.onMessage(message(4, 'd')); // not newer
    feed.onMessage('reconnected');
    feed.onMessage(message(5, 'e'));
    feed.read('"e"', '5'); // a later read (backstop) finds nothing newer
    feed.read('"g"', '7'); // a read after lost publishes catches up
    feed.onMessage(message(6, 'f')); // older than what was handed over: skipped
    expect(seen).toEqual(['c', 'd', 'e', 'g']);
  });

  it('a read with no stored value releases the held messages', () => {
    const seen: unknown[] = [];
    const feed = new ProgressFeed((value) => seen.push(value));
    feed.onMessage(message(1, { pct: 10 }));
    feed.read(null, null);
    expect(seen).toEqual([{ pct: 10 }]);
  });

  it('hands over nothing once stopped', () => {
    const seen: unknown[] = [];
    const feed = new ProgressFeed((value) => seen.push(value));
    feed.onMessage(message(1, 'a'));
    feed.stop();
    feed.read('"a"', '1');
    feed.onMessage(message(2, 'b'));
    expect(seen).toEqual([]);
  });

  it('a throwing or rejecting callback does not stop the feed', async () => {
    const seen: unknown[] = [];
    const throwing = new ProgressFeed((value) => {
      seen.push(value);
      throw new Error('callback bug');
    });
    throwing.read('1', '1');
    throwing.onMessage(message(2, 2));
    expect(seen).toEqual([1, 2]);
    const unhandled = jest.fn();
    process.on('unhandledRejection', unhandled);
    try {
      // eslint-disable-next-line @typescript-eslint/no-misused-promises -- a promise-returning callback where void is expected is the point: its rejection must not go unhandled
      const rejecting = new ProgressFeed(async (value) => {
        seen.push(value);
        throw new Error('async callback bug');
      });
      rejecting.read('3', '3');
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).not.toHaveBeenCalled();
      expect(seen).toEqual([1, 2, 3]);
    } finally {
      process.off('unhandledRejection', unhandled);
    }
  });
});
