import { Logger } from '@nestjs/common';
import type { RunFailedEvent, RunOutcomeEvent } from '../../lib/interfaces/run.events';
import { RunEvents } from '../../lib/worker/run.events';

const completed: RunOutcomeEvent = { runId: 'r1', workflow: 'charge', attempt: 1, durationMs: 5 };
const failed: RunFailedEvent = { ...completed, error: { name: 'Error', message: 'nope' }, willRetry: true };

describe('RunEvents', () => {
  let warn: jest.SpyInstance;

  beforeEach(() => {
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });

  afterEach(() => {
    warn.mockRestore();
  });

  it('runs the listeners after one that throws, does not throw, and logs a warning naming the event', () => {
    const events = new RunEvents();
    const heard: string[] = [];
    events.on('completed', (event) => heard.push(`first ${event.runId}`));
    events.on('completed', () => {
      throw new TypeError('listener bug');
    });
    events.on('completed', (event) => heard.push(`third ${event.runId}`));
    events.on('completed', (event) => heard.push(`fourth ${event.runId}`));

    expect(() => events.emit('completed', completed)).not.toThrow();

    expect(heard).toEqual(['first r1', 'third r1', 'fourth r1']);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0][0]).toContain('"completed"');
    expect(warn.mock.calls[0][0]).toContain('TypeError: listener bug');
    expect((warn.mock.contexts[0] as unknown as { context?: string }).context).toBe('Sluice');
  });

  it('logs each throwing listener, and copes with a thrown value that is not an Error', () => {
    const events = new RunEvents();
    const heard: RunFailedEvent[] = [];
    events.on('failed', () => {
      throw Object.create(null);
    });
    events.on('failed', () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- the case under test: a listener that throws a non-Error
      throw 'a string';
    });
    events.on('failed', (event) => heard.push(event));

    expect(() => events.emit('failed', failed)).not.toThrow();

    expect(heard).toEqual([failed]);
    expect(warn).toHaveBeenCalledTimes(2);
    expect(warn.mock.calls[0][0]).toContain('"failed"');
    expect(warn.mock.calls[1][0]).toContain('a string');
  });

  it('logs a listener that fails on every event once a minute, not once per event', () => {
    const events = new RunEvents();
    events.on('failed', () => {
      throw new Error('metrics backend down');
    });
    for (let i = 0; i < 5; i++) events.emit('failed', failed);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0][0]).toContain('metrics backend down');
  });

  it('logs a rejection from an async listener instead of leaving it unhandled', async () => {
    const events = new RunEvents();
    let after = false;
    // eslint-disable-next-line @typescript-eslint/no-misused-promises -- the case under test: an async listener that rejects
    events.on('completed', async () => {
      throw new Error('async bug');
    });
    events.on('completed', () => {
      after = true;
    });

    events.emit('completed', completed);
    await new Promise((resolve) => setImmediate(resolve));

    expect(after).toBe(true);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0][0]).toContain('async bug');
  });

  it('stops calling a listener once it unsubscribes', () => {
    const events = new RunEvents();
    const heard: number[] = [];
    const off = events.on('completed', (event) => heard.push(event.attempt));
    events.emit('completed', completed);
    off();
    events.emit('completed', { ...completed, attempt: 2 });
    expect(heard).toEqual([1]);
  });
});
