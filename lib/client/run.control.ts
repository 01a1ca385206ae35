import { InvalidOptionError, RunNotFoundError } from '../errors';
import type { ResolvedQueueOptions } from '../queue.options';
import type { LuaScripts } from '../redis/lua.scripts';
import type { RedisKeys } from '../redis/redis.keys';
import { cancelledErrorJson, CANCEL_BATCH, sendCancel } from '../redis/commands/cancel.command';
import { checkId, checkName } from '../util/names';
import { EVERY_GROUP, type DeclarationOutcome } from './limits';
import { RateLimit, toRateLimit } from './rate-limit';
import type { RunState } from './run-info';
import type { WorkflowRef } from './queue.client';

/** Options of `QueueClient.cancel`. */
export interface CancelOptions {
  /** Why: stored with the run (`RunInfo.error.message` reads `cancelled: <reason>`) and carried by `RunCancelledError.reason`; at most 1,000 characters. */
  reason?: string;
}

/** What `QueueClient.cancel` did. */
export interface CancelResult {
  /** `true` if this call cancelled the run; `false` if it had finished already (nothing was changed). */
  cancelled: boolean;
  /** The state the call found the run in: for a finished run, its final state; for a run in a durable wait, the wait's (e.g. 'waiting-child'). */
  state: RunState;
  /**
   * Runs this call cancelled with it: the children it waited for (`ctx.invoke`), theirs in turn…
   * 0 for most runs. A cancel of a finished run whose cascade was cut short (its caller went away)
   * finishes that cascade and counts what it cancelled.
   */
  children: number;
}

/** Which workflow (by name, class or contract), or which group of a workflow, `pause`/`resume` address. */
export interface PauseTarget {
  workflow: WorkflowRef;
  group?: string;
}

const MAX_REASON_LENGTH = 1_000;

/**
 * Cancelling runs, pausing workflows and groups, and rate limits: each one script call that
 * changes fleet-wide state in Redis (lua/cancel.lua, lua/set-control.lua) — a cancel that cascades
 * to many children one call per {@link CANCEL_BATCH} runs. Input is checked first; nothing is
 * written on bad input.
 */
export class RunControl {
  constructor(
    private readonly scripts: () => LuaScripts,
    private readonly keys: RedisKeys,
    private readonly options: ResolvedQueueOptions,
  ) {}

  async cancel(runId: string, opts: CancelOptions = {}): Promise<CancelResult> {
    checkId(runId, 'runId');
    if (opts === null || typeof opts !== 'object') throw new InvalidOptionError('opts', 'must be an object { reason? }');
    const reason = opts.reason ?? '';
    if (typeof reason !== 'string' || reason.length > MAX_REASON_LENGTH) {
      throw new InvalidOptionError('opts.reason', `must be a string of at most ${MAX_REASON_LENGTH} characters`);
    }
    const record = { error: cancelledErrorJson(reason), reason, retentionMs: this.options.defaults.resultTtlMs };
    let repeated = false;
    const first = await sendCancel(this.scripts(), this.keys, runId, record, (repeat) => (repeated = repeat));
    if (first.outcome === 'missing') throw new RunNotFoundError(runId);
    const { state } = first;
    // Sent again after a lost reply, the call finds the run as its first try left it: cancelled.
    const cancelled = first.outcome === 'cancelled' || (repeated && state === 'cancelled');
    // The rest of the cascade, a batch a call; each call visits at least one run, so this ends.
    let children = first.cascaded;
    for (let remaining = first.left; remaining > 0; ) {
      const more = await sendCancel(this.scripts(), this.keys, runId, record);
      children += more.cascaded;
      remaining = more.left;
    }
    return { cancelled, state: state as RunState, children };
  }

  /**
   * Pauses or resumes a target checked by the caller (`checkPauseTarget`).
   * @returns whether the call changed anything (`false`: it was paused already, or not paused to resume).
   */
  async setPaused(target: { workflow: string; group?: string }, paused: boolean): Promise<boolean> {
    const { workflow, group } = target;
    const [previous] = await this.scripts().run<[string, string]>('set-control', [this.keys.limits, this.keys.seq], [
      this.keys.base, 'pause', workflow, group ?? '', paused ? '1' : '', '',
    ], { idempotent: true });
    return (previous === '1') !== paused;
  }

  /**
   * Sets or removes a rate limit (`group` '*' = every group's default) at runtime; returns the
   * previous one. The caller has checked it (`checkRateLimit`).
   */
  async setRateLimit(workflow: string, group: string | undefined, rateLimit: RateLimit | null): Promise<RateLimit | null> {
    return (await this.writeRateLimit(workflow, group, rateLimit, false)).previous;
  }

  /**
   * A worker bootstrap's declared rate limit (the workflow's, or every group's default): written
   * unless an operator's runtime value overrides this same declaration (`kept`: nothing written,
   * `previous` is the value in force); `dropped` when it replaced one that overrode another.
   */
  declareRateLimit(workflow: string, group: undefined | typeof EVERY_GROUP, rateLimit: RateLimit | null): Promise<{ previous: RateLimit | null; outcome: DeclarationOutcome }> {
    return this.writeRateLimit(workflow, group, rateLimit, true);
  }

  private async writeRateLimit(workflow: string, group: string | undefined, rateLimit: RateLimit | null, byCode: boolean) {
    const keys = [this.keys.limits, this.keys.seq];
    const send = (kind: string, max: number | '', perMs: number | '') =>
      this.scripts().run<[string, string, number, string?]>('set-control', keys, [this.keys.base, kind, workflow, group ?? '', max, perMs, byCode ? 'code' : ''], { idempotent: true });
    const [max, perMs, left, outcome] = await send('rate', rateLimit ? rateLimit.max : '', rateLimit ? rateLimit.perMs : '');
    // The groups the old limit held are reviewed in batches of 500 (lua/includes/common.lua
    // startRateReview): each is reviewed once (one still without room is held again, out of the
    // review), so the count only falls. The workflow's reserves take batches too, and finish the
    // review if this loop stops part-way; setting the limit again goes on with it.
    for (let batches = Math.ceil(left / 500), remaining = left; remaining > 0 && batches > 0; batches--) [, , remaining] = await send('rate-review', '', '');
    return { previous: toRateLimit(max, perMs), outcome: (outcome ?? '') as DeclarationOutcome };
  }
}

/** Checks a pause target whose workflow is resolved to its name. */
export function checkPauseTarget(target: { workflow: string; group?: string }): { workflow: string; group?: string } {
  const workflow = checkName(target.workflow, 'target.workflow');
  if (target.group === undefined) return { workflow };
  if (target.group === EVERY_GROUP) throw new InvalidOptionError('target.group', 'pause one group at a time, or the whole workflow (no group)');
  return { workflow, group: checkName(target.group, 'target.group') };
}

/** Limits-hash fields of the rate limits that apply to a target, in the order `QueueClient.getLimits` reads them. */
export function rateFields(workflow: string, group?: string): string[] {
  const wf = `wf:${workflow}`;
  const fields = [`${wf}:rate`, `${wf}:rate-ms`, `${wf}:group-rate`, `${wf}:group-rate-ms`];
  if (group && group !== EVERY_GROUP) fields.push(`${wf}:g:${group}:rate`, `${wf}:g:${group}:rate-ms`);
  return fields;
}
