import { inspect } from 'node:util';
import type { RunInfo } from '../client/run-info';
import { encodePayload } from '../redis/payload.codec';
import { RICH_MARKER } from '../redis/payload.check';

/** The payload fields of a run the dashboard shows. */
const SHOWN = ['input', 'result', 'progress'] as const;

/** How a run page shows a payload JSON has no form for: as Node prints it, bounded. */
const INSPECT = { depth: 12, maxArrayLength: 200, maxStringLength: 4_000, breakLength: 100, sorted: false } as const;

/**
 * A run as the dashboard's JSON API sends it. A payload JSON keeps exactly is sent as it is; one
 * holding a `Date`, `Map`, `BigInt`… (which `JSON.stringify` would mangle, or throw for) is sent
 * as the text Node prints for it (`Map(1) { 1 => 'x' }`), under `shown`, and left out of the run.
 */
export function runForDisplay(run: RunInfo): RunInfo & { shown?: Partial<Record<(typeof SHOWN)[number], string>> } {
  let shown: Partial<Record<(typeof SHOWN)[number], string>> | undefined;
  let copy: RunInfo | undefined;
  for (const field of SHOWN) {
    const value = run[field];
    if (!isRich(value)) continue;
    (shown ??= {})[field] = inspect(value, INSPECT);
    copy ??= { ...run };
    delete copy[field];
  }
  return copy ? { ...copy, shown } : run;
}

/** A one-line preview of a run's input for the runs list. */
export function inputPreview(input: unknown): string {
  if (isRich(input)) return inspect(input, { ...INSPECT, breakLength: Number.POSITIVE_INFINITY, compact: true });
  return JSON.stringify(input) ?? 'undefined';
}

function isRich(value: unknown): boolean {
  if (value === undefined || value === null || typeof value !== 'object')
    return typeof value === 'bigint' || (typeof value === 'number' && !Number.isFinite(value));
  try {
    return encodePayload(value, 'value', Number.POSITIVE_INFINITY).startsWith(RICH_MARKER);
  } catch {
    // Decoded from Redis, so it was encodable; should it not be, show what Node prints.
    return true;
  }
}
