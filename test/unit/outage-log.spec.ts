import { OutageLog } from '../../lib/util/outage-log';

/** The clock is Jest's (modern fake timers drive Date.now()), so no test waits a minute. */
describe('OutageLog', () => {
  let lines: Array<[string, string]>;
  const logger = {
    warn: (m: string) => lines.push(['warn', m]),
    error: (m: string) => lines.push(['error', m]),
    log: (m: string) => lines.push(['log', m]),
  };

  beforeEach(() => {
    lines = [];
    jest.useFakeTimers({ now: 1_000_000 });
  });

  afterEach(() => {
    jest.useRealTimers();
  });

  it('logs the first failure at once, holds back repeats, summarises at 1 min then doubling gaps, and ends with one recovery line', () => {
    const log = new OutageLog(logger);
    log.warn('down: ECONNREFUSED');
    for (let s = 1; s < 60; s++) {
      jest.setSystemTime(1_000_000 + s * 1_000);
      log.warn('down: ECONNREFUSED');
    }
    expect(lines).toEqual([['warn', 'down: ECONNREFUSED']]);
    expect(log.since).toBe(1_000_000);

    jest.setSystemTime(1_000_000 + 60_000);
    log.warn('down: ETIMEDOUT');
    expect(lines[1]).toEqual(['warn', 'down: ETIMEDOUT (59 similar message(s) held back; failing for 60.0 s)']);

    // The next gap is two minutes.
    jest.setSystemTime(1_000_000 + 60_000 + 119_000);
    log.warn('x');
    expect(lines).toHaveLength(2);
    jest.setSystemTime(1_000_000 + 60_000 + 120_000);
    log.warn('x');
    expect(lines[2]).toEqual(['warn', 'x (1 similar message(s) held back; failing for 180.0 s)']);

    jest.setSystemTime(1_000_000 + 200_000);
    log.recovered('back');
    expect(lines[3]).toEqual(['log', 'back after 200.0 s (63 failure(s))']);
    expect(log.since).toBeUndefined();

    // A new streak starts afresh: its first failure is logged at once.
    log.warn('down again');
    expect(lines[4]).toEqual(['warn', 'down again']);
  });

  it('ends a streak nobody was told of silently, and logs at error level when asked', () => {
    const quiet = new OutageLog(logger);
    quiet.recovered('back');
    expect(lines).toEqual([]);

    const errors = new OutageLog(logger, 'error');
    errors.warn('run failed');
    errors.warn('run failed');
    errors.recovered();
    expect(lines).toEqual([['error', 'run failed']]);
  });

  it('survives a logger that throws', () => {
    const log = new OutageLog({
      warn: () => {
        throw new Error('logger down');
      },
      log: () => {
        throw new Error('logger down');
      },
    });
    expect(() => log.warn('x')).not.toThrow();
    expect(() => log.recovered('y')).not.toThrow();
  });
});
