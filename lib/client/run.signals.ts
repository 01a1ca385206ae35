import { Inject, Injectable } from '@nestjs/common';
import { InvalidOptionError, RunNotFoundError, RunStateError, SignalMailboxFullError } from '../errors';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { encodePayload } from '../redis/payload.codec';
import { RedisKeys } from '../redis/redis.keys';
import { checkId } from '../util/names';
import { eventTarget } from '../redis/run.layout';
import { MAX_MAILBOX } from '../workflow/wait.types';

/** What `QueueClient.signal` did. */
export interface SignalResult {
  /** `true`: the run was waiting for this signal and resumes with it; `false`: it went to the run's mailbox, for its next wait of that name. */
  delivered: boolean;
}

/** Options of `QueueClient.sendEvent`. */
export interface SendEventOptions {
  /** The key the runs wait on (`ctx.waitForEvent(name, { key })`), e.g. an order id; default `''`. */
  key?: string;
  /** Handed to every run it resumes; must survive a JSON round trip. */
  payload?: unknown;
}

/** Runs one send-event call resumes at most: one short script call however many runs wait. */
export const EVENT_BATCH = 500;

/**
 * The sending side of durable waits: signals to one run (lua/signal.lua) and events to every run
 * waiting on a name and key (lua/send-event.lua). Input is checked first; nothing is written on
 * bad input.
 */
@Injectable()
export class RunSignals {
  constructor(
    private readonly scripts: LuaScriptsProvider,
    private readonly keys: RedisKeys,
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
  ) {}

  async signal(runId: string, name: string, payload: unknown): Promise<SignalResult> {
    checkId(runId, 'runId');
    checkId(name, 'signal name');
    const encoded = encodePayload(payload, 'signal payload', this.options.maxPayloadBytes);
    // Not idempotent (a retry could queue the signal twice): a lost reply is an OutcomeUnknownError.
    const [outcome, state] = await this.scripts.get().run<[string, string]>('signal', [this.keys.run(runId), this.keys.limits, this.keys.seq], [this.keys.base, runId, name, encoded, MAX_MAILBOX]);
    if (outcome === 'missing') throw new RunNotFoundError(runId);
    if (outcome === 'finished') throw new RunStateError(runId, state, ['unfinished'], 'signal');
    if (outcome === 'full') throw new SignalMailboxFullError(runId, MAX_MAILBOX);
    return { delivered: outcome === 'delivered' };
  }

  async sendEvent(name: string, opts: SendEventOptions = {}): Promise<number> {
    checkId(name, 'event name');
    if (opts === null || typeof opts !== 'object') throw new InvalidOptionError('opts', 'must be an object { key?, payload? }');
    const key = opts.key === undefined || opts.key === '' ? '' : checkId(opts.key, 'opts.key');
    const encoded = encodePayload(opts.payload, 'event payload', this.options.maxPayloadBytes);
    const target = eventTarget(name, key);
    // A batch that lands resumes its runs and takes them out of the index: a retry after a lost
    // reply resumes no run twice.
    // Runs that start waiting while the batches go are resumed too, but only as many batches as
    // the first call found left: a steady stream of new waiters cannot keep the call going.
    let resumed = 0;
    let batches = 1;
    for (let call = 0; call < batches; call++) {
      const [count, left] = await this.scripts.get().run<[number, number]>('send-event', [this.keys.limits, this.keys.seq], [this.keys.base, target, encoded, EVENT_BATCH], { idempotent: true });
      resumed += count;
      if (left === 0) break;
      if (call === 0) batches = 1 + Math.ceil(left / EVENT_BATCH);
    }
    return resumed;
  }
}
