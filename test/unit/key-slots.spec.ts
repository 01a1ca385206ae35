import calculateSlot from 'cluster-key-slot';
import { InvalidNameError } from '../../lib';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { checkId, checkName } from '../../lib/util/names';

/**
 * Key safety on Redis Cluster (issue 11, item 4), as a property test with the slot function Redis
 * uses (`cluster-key-slot`): every key of a namespace hashes to the namespace's one slot, distinct
 * names never build the same key, and the characters that could break either — `{ } : * ? [ ]`,
 * whitespace, anything outside ASCII — never get into a key: names refuse them with a typed error.
 */

/** A small seeded generator, so a failure names a reproducible case. */
function generator(seed: number) {
  let state = seed >>> 0 || 1;
  const next = () => (state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0) / 2 ** 32;
  const pick = (alphabet: string, min: number, max: number) =>
    Array.from({ length: min + Math.floor(next() * (max - min + 1)) }, () => alphabet[Math.floor(next() * alphabet.length)]).join('');
  return { next, pick };
}

const ALNUM = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const NAME_REST = `${ALNUM}._-`;
const ID_CHARS = `${ALNUM}._:/@#=+-`;
const FINISHED = ['completed', 'failed', 'cancelled'] as const;
const WORKFLOW_SUFFIXES = [
  'wake',
  'parked',
  'active',
  'delayed',
  'ready',
  'groups',
  'stats',
  'schedules',
  'next-fires',
  'declared',
] as const;
const LANE_SUFFIXES = ['queue', 'waiting', 'active'] as const;

function names(seed: number, count: number) {
  const { pick } = generator(seed);
  const name = () => checkName(pick(ALNUM, 1, 1) + pick(NAME_REST, 0, 20), 'name');
  const id = () => checkId(pick(ID_CHARS, 1, 40), 'id');
  return Array.from({ length: count }, () => ({ prefix: name(), namespace: name(), workflow: name(), group: name(), id: id() }));
}

/** Every key RedisKeys builds for one set of names (the Lua scripts build theirs from `base` the same way). */
function keysOf(n: ReturnType<typeof names>[number]): string[] {
  const k = new RedisKeys(n.prefix, n.namespace);
  return [
    k.base,
    k.leases,
    k.limits,
    k.workflows,
    k.seq,
    k.stallGate,
    k.schema,
    k.migrateLock,
    k.schedules,
    k.cancel,
    k.run(n.id),
    k.call(n.id),
    k.schedule(n.id),
    k.done(n.id),
    k.progress(n.id),
    k.wake(n.workflow),
    ...FINISHED.map((state) => k.finished(n.workflow, state)),
    ...WORKFLOW_SUFFIXES.map((suffix) => k.workflow(n.workflow, suffix)),
    ...LANE_SUFFIXES.map((suffix) => k.lane(n.workflow, n.group, suffix)),
    ...LANE_SUFFIXES.map((suffix) => k.lane(n.workflow, undefined, suffix)),
    // Keys only the scripts build (lua/includes/*.lua), from the same base.
    `${k.base}wf:${n.workflow}:rate-log`,
    `${k.base}wf:${n.workflow}:g:${n.group}:rate-log`,
    `${k.base}wf:${n.workflow}:rate-held`,
    `${k.base}wf:${n.workflow}:rate-review`,
    `${k.base}ns-waiting`,
  ];
}

describe('key safety on Redis Cluster', () => {
  it('every key of a namespace hashes to the slot of its tag {prefix:namespace} (2,000 random namespaces)', () => {
    for (const n of names(7, 2_000)) {
      const slot = calculateSlot(`${n.prefix}:${n.namespace}`);
      const strays = keysOf(n).filter((key) => calculateSlot(key) !== slot);
      expect({ n, strays }).toEqual({ n, strays: [] });
    }
  });

  it('distinct names never build the same key', () => {
    const owners = new Map<string, string>();
    const clashes: string[] = [];
    const sets = names(11, 1_000);
    // Mix the parts across sets too, so near-identical names meet in one namespace.
    for (const [i, n] of sets.entries()) {
      const other = sets[(i * 7 + 3) % sets.length];
      for (const variant of [
        n,
        { ...n, namespace: other.namespace, prefix: other.prefix },
        { ...n, group: other.workflow, workflow: other.group },
      ]) {
        const owner = JSON.stringify(variant);
        const k = new RedisKeys(variant.prefix, variant.namespace);
        const tagged = [
          ['run', k.run(variant.id)],
          ['schedule', k.schedule(variant.id)],
          ['done', k.done(variant.id)],
          ['call', k.call(variant.id)],
          ['lane', k.lane(variant.workflow, variant.group, 'queue')],
          ['wf', k.workflow(variant.workflow, 'active')],
        ] as const;
        for (const [kind, key] of tagged) {
          // The same key from another kind, or from names that differ in the parts that kind uses, is a clash.
          const part =
            kind === 'lane'
              ? `${variant.prefix}|${variant.namespace}|${variant.workflow}|${variant.group}`
              : kind === 'wf'
                ? `${variant.prefix}|${variant.namespace}|${variant.workflow}`
                : `${variant.prefix}|${variant.namespace}|${variant.id}`;
          const mine = `${kind}:${part}`;
          const seen = owners.get(key);
          if (seen !== undefined && seen !== mine) clashes.push(`${key} ← ${seen} and ${mine} (${owner})`);
          owners.set(key, mine);
        }
      }
    }
    expect(clashes).toEqual([]);
  });

  it('refuses the characters that could move a key to another slot or make a SCAN pattern match too much', () => {
    const dangerous = ['{', '}', ':', '*', '?', '[', ']', ' ', '\t', '\n', 'é', '租户', '🙂'];
    for (const ch of dangerous) {
      expect(() => checkName(`tenant${ch}1`, 'opts.group')).toThrow(InvalidNameError);
      // Run ids may hold ':' (a key suffix only); the rest are refused there too.
      if (ch !== ':') expect(() => checkId(`order${ch}1`, 'opts.id')).toThrow(InvalidNameError);
    }
    expect(checkId('order:1', 'opts.id')).toBe('order:1');
  });
});
