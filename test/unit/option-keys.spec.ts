import { InvalidOptionError } from '../../lib';
import { checkOptionKeys, DELAY_RENAMED, readRenamedOption, suggestOptionKey, TIMEOUT_RENAMED } from '../../lib/util/option-keys';
import { buildEnqueueRequest } from '../../lib/workflow/enqueue.request';

/** What `call` threw (fails the test if it did not throw). */
function thrown(call: () => unknown): Error {
  try {
    call();
  } catch (error) {
    return error as Error;
  }
  throw new Error('did not throw');
}

describe('suggestOptionKey', () => {
  it.each([
    ['timout', ['key', 'timeoutMs'], 'timeoutMs'], // a typo of the name without its Ms suffix
    ['timeout', ['timeoutMs', 'onProgress'], 'timeoutMs'], // a known old name
    ['delay', ['id', 'delayMs', 'runAt'], 'delayMs'],
    ['delayMS', ['id', 'delayMs', 'runAt'], 'delayMs'], // the same key in other case
    ['TimeoutMs', ['timeoutMs'], 'timeoutMs'],
    ['priorty', ['priority', 'group'], 'priority'], // a letter left out
    ['gropu', ['priority', 'group'], 'group'], // two letters swapped
    ['prio', ['priority', 'group'], 'priority'], // a beginning
    ['retries', ['attempts', 'backoff'], 'attempts'], // a name from another library
    ['limiter', ['rateLimit', 'concurrency'], 'rateLimit'],
    ['duration', ['max', 'perMs'], 'perMs'],
    ['allowedHost', ['path', 'allowedHosts'], 'allowedHosts'],
  ])('%s among %j: %s', (key, allowed, meant) => {
    expect(suggestOptionKey(key, allowed)).toBe(meant);
  });

  it.each([
    ['zzBogus', ['timeoutMs', 'key']],
    ['x', ['id', 'key']], // one letter is close to anything short: no guess
    ['timeout', ['key']], // a known old name whose new one is not an option here
    ['constructor', ['id']], // not read from Object.prototype
    ['__proto__', ['id']],
  ])('%s among %j: no suggestion', (key, allowed) => {
    expect(suggestOptionKey(key, allowed)).toBeUndefined();
  });
});

describe('checkOptionKeys', () => {
  it('names the key and, when one is close, the key meant', () => {
    const error = thrown(() => checkOptionKeys({ key: 'k', timout: 300 }, ['key', 'timeoutMs'], 'ctx.waitForEvent opts'));
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as InvalidOptionError).field).toBe('ctx.waitForEvent opts.timout');
    expect(error.message).toBe(
      'ctx.waitForEvent opts.timout: is not an option here; did you mean `timeoutMs`? (the options are key, timeoutMs)',
    );
  });

  it('gives no guess when nothing is close', () => {
    expect(thrown(() => checkOptionKeys({ zzBogus: 1 }, ['a', 'b'])).message).toBe(
      'opts.zzBogus: is not an option here (the options are a, b)',
    );
  });

  it('lets undefined values, own allowed keys and the old names of renamed options pass; checks own keys only', () => {
    expect(() => checkOptionKeys({ a: 1, zzBogus: undefined }, ['a'])).not.toThrow();
    expect(() => checkOptionKeys({ timeout: 5 }, ['timeoutMs'], 'opts', [TIMEOUT_RENAMED])).not.toThrow();
    expect(() => checkOptionKeys(Object.create({ inherited: 1 }) as object, ['a'])).not.toThrow();
    expect(() => checkOptionKeys(undefined, ['a'])).not.toThrow();
    expect(() => checkOptionKeys(null, ['a'])).not.toThrow();
  });

  it('refuses a JSON __proto__ key as any other', () => {
    const opts = JSON.parse('{"__proto__": {"a": 1}}') as object;
    expect(thrown(() => checkOptionKeys(opts, ['a'])).message).toMatch(/^opts\.__proto__: is not an option here/);
  });
});

describe('readRenamedOption', () => {
  let emitWarning: jest.SpyInstance;
  beforeEach(() => (emitWarning = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined)));
  afterEach(() => emitWarning.mockRestore());

  it('reads the new name without a warning', () => {
    expect(readRenamedOption({ timeoutMs: 5 }, TIMEOUT_RENAMED)).toBe(5);
    expect(readRenamedOption(undefined, TIMEOUT_RENAMED)).toBeUndefined();
    expect(emitWarning).not.toHaveBeenCalled();
  });

  it('reads the old name, warning once per process however often it is used', () => {
    for (let i = 0; i < 3; i++) expect(readRenamedOption({ timeout: '2s' }, TIMEOUT_RENAMED, 'ctx.waitForSignal opts')).toBe('2s');
    expect(emitWarning).toHaveBeenCalledTimes(1);
    expect(emitWarning).toHaveBeenCalledWith(
      expect.stringMatching(/`timeout` \(ctx\.waitForSignal opts\) is deprecated; name it `timeoutMs`/),
      {
        type: 'DeprecationWarning',
        code: 'SLUICE_DEP_TIMEOUT',
      },
    );
  });

  it('warns once per old name: delay has its own warning', () => {
    expect(buildEnqueueRequest({ name: 'w', attempts: 1 }, null, { delay: '1s' }, 1_000).delayMs).toBe(1_000);
    expect(buildEnqueueRequest({ name: 'w', attempts: 1 }, null, { delay: 5 }, 1_000).delayMs).toBe(5);
    expect(emitWarning.mock.calls.filter(([, options]) => (options as { code: string }).code === DELAY_RENAMED.code)).toHaveLength(1);
  });

  it('refuses both names at once', () => {
    const error = thrown(() => buildEnqueueRequest({ name: 'w', attempts: 1 }, null, { delay: 5, delayMs: 5 }, 1_000));
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect(error.message).toBe('opts.delay: is the old name of `delayMs`, which is given too: give only `delayMs`');
  });
});
