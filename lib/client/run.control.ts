import { Inject, Injectable } from '@nestjs/common';
import { InvalidOptionError, RunNotFoundError } from '../errors';
import { EVERY_GROUP } from '../interfaces/limits';
import type { RateLimit } from '../interfaces/rate-limit';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { cancelledErrorJson, sendCancel } from '../redis/commands/cancel.command';
import { setPaused, writeRateLimit } from '../redis/commands/set-control.command';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisKeys } from '../redis/redis.keys';
import { checkId, checkName } from '../util/names';
import { checkOptionKeys } from '../util/option-keys';
import type { RunState } from './run-info';
import type { WorkflowRef } from './workflow.ref';

/** Options of `QueueAdmin.cancel`. */
export interface CancelOptions {
  /** Why: stored with the run (`RunInfo.error.message` reads `cancelled: <reason>`) and carried by `RunCancelledError.reason`; at most 1,000 characters. */
  reason?: string;
}

/** What `QueueAdmin.cancel` did. */
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
  /** The workflow: its class, its contract or its name. */
  workflow: WorkflowRef;
  /** One group of the workflow; omit to address the whole workflow (every group). */
  group?: string;
}

const MAX_REASON_LENGTH = 1_000;

/**
 * Cancelling runs, pausing workflows and groups, and rate limits: each one script call that
 * changes fleet-wide state in Redis (lua/cancel.lua, lua/set-control.lua) — a cancel that cascades
 * to many children one call per `CANCEL_BATCH` runs. Input is checked first; nothing is
 * written on bad input.
 */
@Injectable()
export class RunControl {
  constructor(
    private readonly scripts: LuaScriptsProvider,
    private readonly keys: RedisKeys,
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
  ) {}

  async cancel(runId: string, opts: CancelOptions = {}): Promise<CancelResult> {
    checkId(runId, 'runId');
    if (opts === null || typeof opts !== 'object') throw new InvalidOptionError('opts', 'must be an object { reason? }');
    checkOptionKeys(opts, ['reason'], 'cancel opts');
    const reason = opts.reason ?? '';
    if (typeof reason !== 'string' || reason.length > MAX_REASON_LENGTH) {
      throw new InvalidOptionError('opts.reason', `must be a string of at most ${MAX_REASON_LENGTH} characters`);
    }
    const record = { error: cancelledErrorJson(reason), reason, retentionMs: this.options.defaults.resultTtlMs };
    let repeated = false;
    const first = await sendCancel(this.scripts.get(), this.keys, runId, record, (repeat) => (repeated = repeat));
    if (first.outcome === 'missing') throw new RunNotFoundError(runId);
    const { state } = first;
    // Sent again after a lost reply, the call finds the run as its first try left it: cancelled.
    const cancelled = first.outcome === 'cancelled' || (repeated && state === 'cancelled');
    // The rest of the cascade, a batch a call; each call visits at least one run, so this ends.
    let children = first.cascaded;
    for (let remaining = first.left; remaining > 0;) {
      const more = await sendCancel(this.scripts.get(), this.keys, runId, record);
      children += more.cascaded;
      remaining = more.left;
    }
    return { cancelled, state: state as RunState, children };
  }

  /** Pauses or resumes a target checked by the caller (`checkPauseTarget`); see setPaused. */
  setPaused(target: { workflow: string; group?: string }, paused: boolean): Promise<boolean> {
    return setPaused(this.scripts.get(), this.keys, target, paused);
  }

  /**
   * Sets or removes a rate limit (`group` '*' = every group's default) at runtime; returns the
   * previous one. The caller has checked it (`checkRateLimit`).
   */
  async setRateLimit(workflow: string, group: string | undefined, rateLimit: RateLimit | null): Promise<RateLimit | null> {
    return (await writeRateLimit(this.scripts.get(), this.keys, workflow, group, rateLimit, false)).previous;
  }
}

/** Checks a pause target whose workflow is resolved to its name. */
export function checkPauseTarget(target: { workflow: string; group?: string }): { workflow: string; group?: string } {
  const workflow = checkName(target.workflow, 'target.workflow');
  if (target.group === undefined) return { workflow };
  if (target.group === EVERY_GROUP)
    throw new InvalidOptionError('target.group', 'pause one group at a time, or the whole workflow (no group)');
  return { workflow, group: checkName(target.group, 'target.group') };
}
