import { InvalidNameError, InvalidOptionError, type WorkflowDedupeOptions } from '../../lib';
import { checkDedupeWindow, dedupeRequest } from '../../lib/workflow/dedupe.check';
import { buildEnqueueRequest } from '../../lib/workflow/enqueue.request';
import { CLIENT_ENQUEUE_OPTIONS, type EnqueueOptions } from '../../lib/interfaces/enqueue.options';

/** The checks of a dedupe (lib/workflow/dedupe.check.ts), before any Redis call; the e2e spec runs them through QueueClient. */
describe('dedupe checks', () => {
  const request = (opts: EnqueueOptions = {}) =>
    buildEnqueueRequest({ name: 'w', attempts: 3 }, { u: 'a' }, opts, 1_000, CLIENT_ENQUEUE_OPTIONS);
  const declared: WorkflowDedupeOptions = { key: (input) => (input as { u: string }).u, ttlMs: 50, mode: 'debounce', replace: false };

  it('resolves the defaults: debounce replaces unless told not to; throttle never does', () => {
    expect(checkDedupeWindow({ key: 'k', ttlMs: 10, mode: 'debounce' }, 'd')).toEqual({ mode: 'debounce', ttlMs: 10, replace: true });
    expect(checkDedupeWindow({ key: 'k', ttlMs: 10, mode: 'debounce', replace: false, maxWaitMs: 10 }, 'd')).toEqual({
      mode: 'debounce',
      ttlMs: 10,
      replace: false,
      maxWaitMs: 10,
    });
    expect(checkDedupeWindow({ key: 'k', ttlMs: 10, mode: 'throttle' }, 'd')).toEqual({ mode: 'throttle', ttlMs: 10, replace: false });
  });

  it.each([
    [null, /^d: must be an object/],
    [[], /^d: must be an object/],
    [{ key: 'k', ttlMs: 10 }, /^d\.mode: must be 'throttle' or 'debounce', got undefined/],
    [{ key: 'k', ttlMs: 1.5, mode: 'throttle' }, /^d\.ttlMs: /],
    [{ key: 'k', ttlMs: 0, mode: 'throttle' }, /^d\.ttlMs: /],
    [{ key: 'k', ttlMs: 10, mode: 'debounce', replace: 'yes' }, /^d\.replace: must be a boolean, got string/],
    [{ key: 'k', ttlMs: 10, mode: 'throttle', replace: false }, /^d\.replace: applies to mode 'debounce' only/],
    [{ key: 'k', ttlMs: 10, mode: 'debounce', maxWaitMs: 9 }, /^d\.maxWaitMs: must be at least ttlMs \(10\), got 9/],
    [{ key: 'k', ttlMs: 10, mode: 'debounce', extend: true }, /^d\.extend: is not an option here/],
  ])('refuses %j', (value, message) => {
    expect(() => checkDedupeWindow(value, 'd')).toThrow(InvalidOptionError);
    expect(() => checkDedupeWindow(value, 'd')).toThrow(message);
  });

  it('takes the enqueue’s dedupe over the declared one, whole; false turns the declared one off', () => {
    const own = { key: 'own', ttlMs: 20, mode: 'throttle' as const };
    expect(dedupeRequest(own, declared, { u: 'a' }, request())).toEqual({ key: 'own', ttlMs: 20, mode: 'throttle', replace: false });
    expect(dedupeRequest(undefined, declared, { u: 'a' }, request())).toEqual({ key: 'a', ttlMs: 50, mode: 'debounce', replace: false });
    expect(dedupeRequest(false, declared, { u: 'a' }, request())).toBeUndefined();
    expect(dedupeRequest(undefined, undefined, { u: 'a' }, request())).toBeUndefined();
  });

  it('refuses a delay with debounce, which owns it; takes it with throttle', () => {
    expect(() => dedupeRequest(undefined, declared, { u: 'a' }, request({ delayMs: 5 }))).toThrow(
      /^opts\.delayMs: cannot be set with dedupe mode 'debounce'/,
    );
    expect(() => dedupeRequest(undefined, declared, { u: 'a' }, request({ runAt: new Date() }))).toThrow(/^opts\.runAt: cannot be set/);
    expect(dedupeRequest({ key: 'k', ttlMs: 5, mode: 'throttle' }, undefined, {}, request({ delayMs: 5 }))?.mode).toBe('throttle');
  });

  it('checks the key: the given one, or what the declared function returns', () => {
    expect(() => dedupeRequest({ key: 'a b', ttlMs: 5, mode: 'throttle' }, undefined, {}, request())).toThrow(InvalidNameError);
    expect(() => dedupeRequest(undefined, declared, { u: '' }, request())).toThrow(
      /^@Workflow\('w'\) dedupe\.key\(input\): must not be empty/,
    );
  });
});
