import { LazyAbort } from '../../lib/execution/lazy.abort';

describe('LazyAbort', () => {
  it('hands out a live signal that a later abort fires, with its reason', () => {
    const abort = new LazyAbort();
    const signal = abort.signal;
    const heard: unknown[] = [];
    signal.addEventListener('abort', () => heard.push(signal.reason));
    expect(signal.aborted).toBe(false);
    const reason = new Error('lease lost');
    abort.abort(reason);
    expect(heard).toEqual([reason]);
    expect(abort.reason).toBe(reason);
  });

  it('hands out an already aborted signal when asked after the abort, and keeps the first reason', () => {
    const abort = new LazyAbort();
    abort.abort('first');
    abort.abort('second');
    expect(abort.signal.aborted).toBe(true);
    expect(abort.signal.reason).toBe('first');
    expect(abort.reason).toBe('first');
  });

  it('has no reason until aborted', () => {
    expect(new LazyAbort().reason).toBeUndefined();
  });
});
