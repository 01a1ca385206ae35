import { LeaseLostError } from '../errors';
import { decodePayload, encodePayload } from '../redis/payload.codec';
import { checkId } from '../util/names';
import type { StepRunner } from '../workflow/run.scope';

/** Persists one step result under the run's lease; resolves false if the lease is gone. */
export type PersistStep = (key: string, encoded: string) => Promise<boolean>;

/**
 * Memoizes the steps of one run attempt. A step's key is its name plus its occurrence in this
 * attempt (`charge#1`, `charge#2`…), so a step called in a loop memoizes each call. Reads come
 * from the memo shipped with the claim; each executed step costs one token-checked write, done
 * before the step returns.
 */
export class StepRecorder implements StepRunner {
  private readonly occurrences = new Map<string, number>();

  constructor(
    private readonly runId: string,
    private readonly memo: Map<string, string>,
    private readonly persist: PersistStep,
    private readonly maxPayloadBytes: number,
  ) {}

  async step<T>(name: string, fn: () => Promise<T> | T): Promise<T> {
    checkId(name, 'step name');
    if (typeof fn !== 'function') throw new TypeError(`ctx.step("${name}", fn): fn must be a function`);
    const occurrence = (this.occurrences.get(name) ?? 0) + 1;
    this.occurrences.set(name, occurrence);
    const key = `${name}#${occurrence}`;
    const saved = this.memo.get(key);
    if (saved !== undefined) return decodePayload<T>(saved);

    const value = await fn();
    const encoded = encodePayload(value, `step "${key}" result`, this.maxPayloadBytes);
    if (!(await this.persist(key, encoded))) throw new LeaseLostError(this.runId);
    this.memo.set(key, encoded);
    // Hand back the decoded copy, so the first attempt sees exactly what a replay would.
    return decodePayload<T>(encoded);
  }
}
