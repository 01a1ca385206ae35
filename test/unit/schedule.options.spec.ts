import 'reflect-metadata';
import { Workflow } from '../../lib/decorators/workflow.decorator';
import type { WorkflowMetadata } from '../../lib/decorators/workflow.decorator';
import { MAX_PRIORITY } from '../../lib/interfaces/enqueue.options';
import {
  InvalidInputError,
  InvalidNameError,
  InvalidOptionError,
  InvalidScheduleError,
  PayloadNotSerializableError,
  PayloadTooLargeError,
} from '../../lib/errors';
import { WORKFLOW_METADATA } from '../../lib/interfaces/queue.constants';
import {
  buildScheduleSpec,
  checkDeclaredSchedules,
  DEFAULT_CATCH_UP_LIMIT,
  MAX_CATCH_UP_LIMIT,
  ScheduleSpec,
} from '../../lib/workflow/schedule.check';
import type { ScheduleDefinition } from '../../lib/interfaces/schedule.options';

const WF = { name: 'report', attempts: 3 };
const MAX_BYTES = 1024 * 1024;

const build = (definition: unknown, id = 'report.hourly', field = 'opts', maxBytes = MAX_BYTES, workflow = WF): ScheduleSpec =>
  buildScheduleSpec(id, workflow, definition as ScheduleDefinition, field, maxBytes);

/** The error `fn` throws, checked to be an instance of `type` (and so of InvalidInputError). */
function thrown<E extends InvalidInputError>(fn: () => unknown, type: new (...args: never[]) => E): E {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(type);
  expect(caught).toBeInstanceOf(InvalidInputError);
  const error = caught as E;
  // InvalidInputError's message always leads with its field.
  expect(error.message.startsWith(`${error.field}: `)).toBe(true);
  return error;
}

describe('buildScheduleSpec: a valid schedule', () => {
  it('fills in the defaults', () => {
    const spec = build({ cron: '0 * * * *' });
    expect(spec).toEqual({
      id: 'report.hourly',
      workflow: 'report',
      pattern: { cron: '0 * * * *', tz: undefined, seed: 'report.hourly' },
      input: 'null',
      group: '',
      priority: 0,
      attempts: 3,
      overlap: true,
      catchUp: 'latest',
      catchUpLimit: DEFAULT_CATCH_UP_LIMIT,
      fingerprint: expect.any(String),
    });
    expect(DEFAULT_CATCH_UP_LIMIT).toBe(100);
  });

  it('keeps every option it is given', () => {
    const spec = build({
      cron: '*/10 * * * * *',
      tz: 'Europe/Berlin',
      input: { region: 'eu', ids: [1, 2] },
      group: 'tenant-7',
      priority: 12,
      overlap: false,
      catchUp: 'all',
      catchUpLimit: 250,
    });
    expect(spec.pattern).toEqual({ cron: '*/10 * * * * *', tz: 'Europe/Berlin', seed: 'report.hourly' });
    expect(JSON.parse(spec.input)).toEqual({ region: 'eu', ids: [1, 2] });
    expect(spec.group).toBe('tenant-7');
    expect(spec.priority).toBe(12);
    expect(spec.overlap).toBe(false);
    expect(spec.catchUp).toBe('all');
    expect(spec.catchUpLimit).toBe(250);
    expect(spec.attempts).toBe(3);
  });

  it('encodes an explicit null input as JSON null, and other inputs as payloads', () => {
    expect(build({ cron: '0 * * * *', input: null }).input).toBe('null');
    expect(build({ cron: '0 * * * *', input: 0 }).input).toBe('0');
    expect(build({ cron: '0 * * * *', input: 'x' }).input).toBe('"x"');
    expect(build({ cron: '0 * * * *', input: new Date('2026-01-01T00:00:00Z') }).input).toBe(
      '~rich1~["2026-01-01T00:00:00.000Z",[["Date"]]]',
    );
  });

  it('seeds H fields with the schedule id', () => {
    expect(build({ cron: 'H * * * *' }, 'nightly').pattern.seed).toBe('nightly');
  });

  it('trims the cron it stores', () => {
    expect(build({ cron: '  0 * * * *\t' }).pattern.cron).toBe('0 * * * *');
  });

  it('accepts the bounds of priority and catchUpLimit', () => {
    expect(build({ cron: '0 * * * *', priority: 0 }).priority).toBe(0);
    expect(build({ cron: '0 * * * *', priority: MAX_PRIORITY }).priority).toBe(MAX_PRIORITY);
    expect(build({ cron: '0 * * * *', catchUpLimit: 1 }).catchUpLimit).toBe(1);
    expect(build({ cron: '0 * * * *', catchUpLimit: MAX_CATCH_UP_LIMIT }).catchUpLimit).toBe(1_000);
  });

  it('accepts an input of exactly maxPayloadBytes', () => {
    // '"xxxxxxxx"' is 10 bytes.
    expect(build({ cron: '0 * * * *', input: 'x'.repeat(8) }, 'id', 'opts', 10).input).toBe(`"${'x'.repeat(8)}"`);
  });
});

describe('buildScheduleSpec: fingerprint', () => {
  const base: ScheduleDefinition = {
    cron: '0 * * * *',
    tz: 'Europe/Berlin',
    input: { a: 1 },
    group: 'g1',
    priority: 5,
    overlap: true,
    catchUp: 'all',
    catchUpLimit: 50,
  };
  const fingerprint = (definition: ScheduleDefinition, attempts = 3) =>
    build(definition, 'id', 'opts', MAX_BYTES, { name: 'report', attempts }).fingerprint;

  it('is equal for equal definitions', () => {
    expect(fingerprint({ ...base, input: { a: 1 } })).toBe(fingerprint({ ...base, input: { a: 1 } }));
    expect(fingerprint({ cron: '0 * * * *' })).toBe(fingerprint({ cron: '0 * * * *' }));
  });

  it('is equal whether defaults are spelled out or left out', () => {
    expect(fingerprint({ cron: '0 * * * *' })).toBe(
      fingerprint({ cron: '0 * * * *', input: null, priority: 0, overlap: true, catchUp: 'latest', catchUpLimit: DEFAULT_CATCH_UP_LIMIT }),
    );
  });

  it('ignores whitespace around the cron', () => {
    expect(fingerprint({ ...base, cron: ' 0 * * * * ' })).toBe(fingerprint(base));
  });

  it.each<[string, ScheduleDefinition]>([
    ['cron', { ...base, cron: '5 * * * *' }],
    ['tz', { ...base, tz: 'UTC' }],
    ['tz left out', { ...base, tz: undefined }],
    ['input', { ...base, input: { a: 2 } }],
    ['input left out', { ...base, input: undefined }],
    ['group', { ...base, group: 'g2' }],
    ['group left out', { ...base, group: undefined }],
    ['priority', { ...base, priority: 6 }],
    ['overlap', { ...base, overlap: false }],
    ['catchUp', { ...base, catchUp: 'latest' }],
    ['catchUpLimit', { ...base, catchUpLimit: 51 }],
  ])('differs when %s differs', (_field, changed) => {
    expect(fingerprint(changed)).not.toBe(fingerprint(base));
  });

  it('differs when the workflow attempts differ', () => {
    expect(fingerprint(base, 4)).not.toBe(fingerprint(base, 3));
  });

  it('is different for every single-field change (no two collide)', () => {
    const variants = [
      base,
      { ...base, cron: '5 * * * *' },
      { ...base, tz: 'UTC' },
      { ...base, input: { a: 2 } },
      { ...base, group: 'g2' },
      { ...base, priority: 6 },
      { ...base, overlap: false },
      { ...base, catchUp: 'latest' as const },
      { ...base, catchUpLimit: 51 },
    ].map((definition) => fingerprint(definition));
    variants.push(fingerprint(base, 4));
    expect(new Set(variants).size).toBe(variants.length);
  });
});

describe('buildScheduleSpec: rejects', () => {
  describe('the definition', () => {
    it.each([
      ['null', null],
      ['a number', 5],
      ['a string', '0 * * * *'],
      ['undefined', undefined],
    ])('%s as opts', (_label, definition) => {
      const error = thrown(() => build(definition), InvalidOptionError);
      expect(error.field).toBe('opts');
      expect(error.message).toContain('must be an object');
    });
  });

  describe('the cron and time zone, as InvalidScheduleError naming the value', () => {
    it.each([
      ['61 * * * *', '"61 * * * *" is not a valid cron expression'],
      ['not a cron', '"not a cron" has 3 fields'],
      ['', 'must be a non-empty cron expression string, got ""'],
      ['   ', 'must be a non-empty cron expression string, got "   "'],
      ['0 0 0 1 1 * *', '"0 0 0 1 1 * *" has 7 fields'],
      ['0 * * *', '"0 * * *" has 4 fields'],
      ['0 0 30 2 *', '"0 0 30 2 *" is not a valid cron expression'],
    ])('cron %p', (cron, message) => {
      const error = thrown(() => build({ cron }), InvalidScheduleError);
      expect(error.field).toBe('opts.cron');
      expect(error.message).toContain(message);
    });

    it.each([
      ['a number', 5, 'got 5'],
      ['undefined', undefined, 'got undefined'],
      ['an array', ['0 * * * *'], 'got ["0 * * * *"]'],
    ])('a non-string cron (%s)', (_label, cron, got) => {
      const error = thrown(() => build({ cron }), InvalidScheduleError);
      expect(error.field).toBe('opts.cron');
      expect(error.message).toContain(got);
    });

    it('a cron longer than 256 characters', () => {
      const cron = `0 * * * *${' '.repeat(248)}`;
      expect(cron).toHaveLength(257);
      const error = thrown(() => build({ cron }), InvalidScheduleError);
      expect(error.field).toBe('opts.cron');
      expect(error.message).toContain('at most 256 characters');
    });

    it('an unknown time zone', () => {
      const error = thrown(() => build({ cron: '0 * * * *', tz: 'Mars/Olympus' }), InvalidScheduleError);
      expect(error.field).toBe('opts.tz');
      expect(error.message).toContain('"Mars/Olympus"');
    });

    it.each([
      ['a number', 1, 'got 1'],
      ['null', null, 'got null'],
      ['an empty string', '', 'got ""'],
      ['a boolean', true, 'got true'],
    ])('a time zone of the wrong type (%s)', (_label, tz, got) => {
      const error = thrown(() => build({ cron: '0 * * * *', tz }), InvalidScheduleError);
      expect(error.field).toBe('opts.tz');
      expect(error.message).toContain(got);
    });
  });

  describe('options, as InvalidOptionError', () => {
    it.each([
      ['a string', 'yes', 'got yes'],
      ['a number', 1, 'got 1'],
      ['null', null, 'got null'],
    ])('overlap %s', (_label, overlap, got) => {
      const error = thrown(() => build({ cron: '0 * * * *', overlap }), InvalidOptionError);
      expect(error.field).toBe('opts.overlap');
      expect(error.message).toContain('must be a boolean');
      expect(error.message).toContain(got);
    });

    it.each([
      ['an unknown mode', 'none', 'got "none"'],
      ['a wrong case', 'All', 'got "All"'],
      ['a boolean', true, 'got true'],
      ['null', null, 'got null'],
    ])('catchUp %s', (_label, catchUp, got) => {
      const error = thrown(() => build({ cron: '0 * * * *', catchUp }), InvalidOptionError);
      expect(error.field).toBe('opts.catchUp');
      expect(error.message).toContain("must be 'latest' or 'all'");
      expect(error.message).toContain(got);
    });

    it.each([
      ['0', 0],
      ['negative', -1],
      ['above 1000', 1_001],
      ['fractional', 1.5],
      ['NaN', NaN],
      ['a string', '10'],
      ['null', null],
    ])('catchUpLimit %s', (_label, catchUpLimit) => {
      const error = thrown(() => build({ cron: '0 * * * *', catchUp: 'all', catchUpLimit }), InvalidOptionError);
      expect(error.field).toBe('opts.catchUpLimit');
      expect(error.message).toContain('from 1 to 1000');
      expect(error.message).toContain(`got ${String(catchUpLimit)}`);
    });

    it.each([
      ['negative', -1],
      ['above MAX_PRIORITY', MAX_PRIORITY + 1],
      ['fractional', 0.5],
      ['Infinity', Infinity],
      ['a string', '1'],
    ])('priority %s', (_label, priority) => {
      const error = thrown(() => build({ cron: '0 * * * *', priority }), InvalidOptionError);
      expect(error.field).toBe('opts.priority');
      expect(error.message).toContain(`from 0 to ${MAX_PRIORITY}`);
      expect(error.message).toContain(`got ${String(priority)}`);
    });
  });

  describe('names, as InvalidNameError', () => {
    it.each([
      ['a colon', 'a:b', '"a:b"'],
      ['a space', 'a b', '"a b"'],
      ['a brace', '{a}', '"{a}"'],
      ['empty', '', 'must not be empty'],
      ['a number', 7, 'must be a string'],
    ])('group with %s', (_label, group, message) => {
      const error = thrown(() => build({ cron: '0 * * * *', group }), InvalidNameError);
      expect(error.field).toBe('opts.group');
      expect(error.message).toContain(message);
    });

    it.each([
      ['a space', 'has space', '"has space"'],
      ['a colon', 'a:b', '"a:b"'],
      ['empty', '', 'must not be empty'],
      ['too long', 'x'.repeat(101), 'at most 100 characters'],
    ])('an id with %s, as `id` under opts', (_label, id, message) => {
      const error = thrown(() => build({ cron: '0 * * * *' }, id), InvalidNameError);
      expect(error.field).toBe('id');
      expect(error.message).toContain(message);
    });

    it('an id as `<field>.id` under any other field', () => {
      const error = thrown(() => build({ cron: '0 * * * *' }, 'a:b', "@Workflow('w') schedules[1]"), InvalidNameError);
      expect(error.field).toBe("@Workflow('w') schedules[1].id");
      expect(error.message).toContain('"a:b"');
    });
  });

  describe('the input', () => {
    it('a function, as PayloadNotSerializableError at opts.input', () => {
      const error = thrown(() => build({ cron: '0 * * * *', input: () => 1 }), PayloadNotSerializableError);
      expect(error.field).toBe('opts.input');
      expect(error.message).toContain('function');
    });

    it('a WeakMap', () => {
      const error = thrown(() => build({ cron: '0 * * * *', input: { n: new WeakMap() } }), PayloadNotSerializableError);
      expect(error.field).toBe('opts.input.n');
      expect(error.message).toContain('WeakMap');
    });

    it('a circular reference', () => {
      const input: Record<string, unknown> = { a: 1 };
      input.self = input;
      const error = thrown(() => build({ cron: '0 * * * *', input }), PayloadNotSerializableError);
      expect(error.field).toBe('opts.input.self');
      expect(error.message).toContain('circular');
    });

    it('a nested function, naming its path', () => {
      const error = thrown(
        () => build({ cron: '0 * * * *', input: { items: [1, { f: () => 1 }] } }, 'id', "@Workflow('w') schedules[0]"),
        PayloadNotSerializableError,
      );
      expect(error.field).toBe("@Workflow('w') schedules[0].input.items[1].f");
    });

    it('larger than maxPayloadBytes, as PayloadTooLargeError', () => {
      const error = thrown(() => build({ cron: '0 * * * *', input: 'x'.repeat(9) }, 'id', 'opts', 10), PayloadTooLargeError);
      expect(error.field).toBe('opts.input');
      expect(error.bytes).toBe(11);
      expect(error.limit).toBe(10);
      expect(error.message).toContain('11 bytes');
    });

    it('null is not too large for a tiny limit, but is above 3 bytes', () => {
      expect(build({ cron: '0 * * * *' }, 'id', 'opts', 4).input).toBe('null');
      expect(() => build({ cron: '0 * * * *' }, 'id', 'opts', 3)).toThrow(PayloadTooLargeError);
    });
  });
});

describe('checkDeclaredSchedules', () => {
  it('gives a single schedule without id the workflow name as id', () => {
    expect(checkDeclaredSchedules('report', [{ cron: '0 * * * *', tz: 'UTC' }])).toEqual([{ id: 'report', cron: '0 * * * *', tz: 'UTC' }]);
  });

  it('keeps the ids it is given, in order', () => {
    const schedules = checkDeclaredSchedules('report', [
      { id: 'a', cron: '0 * * * *' },
      { id: 'b', cron: '@daily', input: { x: 1 } },
    ]);
    expect(schedules).toEqual([
      { id: 'a', cron: '0 * * * *' },
      { id: 'b', cron: '@daily', input: { x: 1 } },
    ]);
  });

  it('does not mutate what it is given', () => {
    const declared = [{ cron: '0 * * * *' }];
    checkDeclaredSchedules('report', declared);
    expect(declared).toEqual([{ cron: '0 * * * *' }]);
  });

  it('accepts an empty array', () => {
    expect(checkDeclaredSchedules('report', [])).toEqual([]);
  });

  it.each([
    ['an object', { cron: '0 * * * *' }],
    ['a string', '0 * * * *'],
    ['null', null],
  ])('rejects schedules that are %s', (_label, schedules) => {
    const error = thrown(() => checkDeclaredSchedules('report', schedules), InvalidOptionError);
    expect(error.field).toBe("@Workflow('report') schedules");
    expect(error.message).toContain('must be an array');
  });

  it.each([
    ['null', null],
    ['a string', '0 * * * *'],
  ])('rejects a schedule that is %s', (_label, schedule) => {
    const error = thrown(() => checkDeclaredSchedules('report', [{ id: 'a', cron: '0 * * * *' }, schedule]), InvalidOptionError);
    expect(error.field).toBe("@Workflow('report') schedules[1]");
  });

  it('requires an id on every schedule when there are several', () => {
    const error = thrown(() => checkDeclaredSchedules('report', [{ id: 'a', cron: '0 * * * *' }, { cron: '@daily' }]), InvalidOptionError);
    expect(error.field).toBe("@Workflow('report') schedules[1].id");
    expect(error.message).toContain('is required when a workflow declares several schedules');
  });

  it('rejects duplicate ids', () => {
    const error = thrown(
      () =>
        checkDeclaredSchedules('report', [
          { id: 'a', cron: '0 * * * *' },
          { id: 'b', cron: '@daily' },
          { id: 'a', cron: '@hourly' },
        ]),
      InvalidOptionError,
    );
    expect(error.field).toBe("@Workflow('report') schedules[2].id");
    expect(error.message).toContain('"a" is declared twice');
  });

  it('validates each schedule with its index in the field', () => {
    const error = thrown(
      () =>
        checkDeclaredSchedules('report', [
          { id: 'a', cron: '0 * * * *' },
          { id: 'b', cron: '0 * * * *', tz: 'Mars/Olympus' },
        ]),
      InvalidScheduleError,
    );
    expect(error.field).toBe("@Workflow('report') schedules[1].tz");
    expect(error.message).toContain('Mars/Olympus');
  });

  it('validates declared ids as names', () => {
    const error = thrown(() => checkDeclaredSchedules('report', [{ id: 'has space', cron: '0 * * * *' }]), InvalidNameError);
    expect(error.field).toBe("@Workflow('report') schedules[0].id");
  });

  // Regression: `schedule.id ?? workflow` turned an explicit `id: null` into the workflow name, so
  // with several schedules a null id slipped past "id is required".
  it('rejects an explicit null id among several schedules', () => {
    expect(() =>
      checkDeclaredSchedules('report', [
        { id: null, cron: '0 * * * *' },
        { id: 'b', cron: '@daily' },
      ]),
    ).toThrow(InvalidInputError);
  });
});

describe('@Workflow schedules', () => {
  const metadataOf = (target: object): WorkflowMetadata => Reflect.getMetadata(WORKFLOW_METADATA, target) as WorkflowMetadata;

  it('throws at decoration for a bad cron, with an InvalidScheduleError whose field starts with the workflow and index', () => {
    let caught: unknown;
    try {
      @Workflow('w', { schedules: [{ cron: 'bad' }] })
      class Bad {}
      void Bad;
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(InvalidScheduleError);
    const error = caught as InvalidScheduleError;
    expect(error.field.startsWith("@Workflow('w') schedules[0]")).toBe(true);
    expect(error.field).toBe("@Workflow('w') schedules[0].cron");
    expect(error.message).toContain('"bad"');
  });

  it('throws when the decorator is created, before it is applied to any class', () => {
    expect(() => Workflow('w', { schedules: [{ cron: '0 * * * *', tz: 'Mars/Olympus' }] })).toThrow(InvalidScheduleError);
  });

  it('throws an InvalidOptionError saying the id is required for two schedules without ids', () => {
    const error = thrown(() => Workflow('w', { schedules: [{ cron: '0 * * * *' }, { cron: '@daily' }] }), InvalidOptionError);
    expect(error.field).toBe("@Workflow('w') schedules[0].id");
    expect(error.message).toMatch(/id: is required/);
  });

  it('throws for duplicate ids', () => {
    const error = thrown(
      () =>
        Workflow('w', {
          schedules: [
            { id: 'x', cron: '0 * * * *' },
            { id: 'x', cron: '@daily' },
          ],
        }),
      InvalidOptionError,
    );
    expect(error.field).toBe("@Workflow('w') schedules[1].id");
    expect(error.message).toContain('"x" is declared twice');
  });

  it('throws for schedules that are not an array', () => {
    const error = thrown(() => Workflow('w', { schedules: { cron: '0 * * * *' } as never }), InvalidOptionError);
    expect(error.field).toBe("@Workflow('w') schedules");
  });

  it('throws for bad options inside a schedule', () => {
    expect(thrown(() => Workflow('w', { schedules: [{ cron: '0 * * * *', catchUpLimit: 0 }] }), InvalidOptionError).field).toBe(
      "@Workflow('w') schedules[0].catchUpLimit",
    );
    expect(thrown(() => Workflow('w', { schedules: [{ cron: '0 * * * *', input: () => 1 }] }), PayloadNotSerializableError).field).toBe(
      "@Workflow('w') schedules[0].input",
    );
  });

  it('records a single schedule without id under the workflow name as id', () => {
    @Workflow('unit.sched-single', { schedules: [{ cron: '0 * * * *', tz: 'Europe/Berlin', input: { n: 1 } }] })
    class Single {}
    const metadata = metadataOf(Single);
    expect(metadata.name).toBe('unit.sched-single');
    expect(metadata.options.schedules).toEqual([{ id: 'unit.sched-single', cron: '0 * * * *', tz: 'Europe/Berlin', input: { n: 1 } }]);
  });

  it('records several schedules with their own ids, alongside the other options', () => {
    @Workflow('unit.sched-many', {
      attempts: 2,
      schedules: [
        { id: 'many.hourly', cron: '@hourly' },
        { id: 'many.daily', cron: '0 6 * * MON-FRI', overlap: false },
      ],
    })
    class Many {}
    const metadata = metadataOf(Many);
    expect(metadata.options.attempts).toBe(2);
    expect(metadata.options.schedules).toEqual([
      { id: 'many.hourly', cron: '@hourly' },
      { id: 'many.daily', cron: '0 6 * * MON-FRI', overlap: false },
    ]);
  });

  it('records no schedules when none are declared', () => {
    @Workflow('unit.sched-none')
    class None {}
    expect(metadataOf(None).options.schedules).toBeUndefined();
  });
});
