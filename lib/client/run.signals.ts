import { Inject, Injectable } from '@nestjs/common';
import { InvalidOptionError, RunNotFoundError, RunStateError, SignalMailboxFullError } from '../errors';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { EVENT_BATCH, type EventRequest, sendEventBatch } from '../redis/commands/send-event.command';
import { sendSignal } from '../redis/commands/signal.command';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { encodePayload } from '../redis/payload.codec';
import { RedisKeys } from '../redis/redis.keys';
import { checkId } from '../util/names';
import { checkOptionKeys } from '../util/option-keys';
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
  /** Handed to every run it resumes; any value a payload keeps (see `Stored`). */
  payload?: unknown;
}

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
    const { outcome, state } = await sendSignal(this.scripts.get(), this.keys, {
      runId,
      name,
      payload: encoded,
      mailboxBound: MAX_MAILBOX,
    });
    if (outcome === 'missing') throw new RunNotFoundError(runId);
    if (outcome === 'finished') throw new RunStateError(runId, state, ['unfinished'], 'signal');
    if (outcome === 'full') throw new SignalMailboxFullError(runId, MAX_MAILBOX);
    return { delivered: outcome === 'delivered' };
  }

  async sendEvent(name: string, opts: SendEventOptions = {}): Promise<number> {
    checkId(name, 'event name');
    if (opts === null || typeof opts !== 'object') throw new InvalidOptionError('opts', 'must be an object { key?, payload? }');
    checkOptionKeys(opts, ['key', 'payload'], 'sendEvent opts');
    const key = opts.key === undefined || opts.key === '' ? '' : checkId(opts.key, 'opts.key');
    const encoded = encodePayload(opts.payload, 'event payload', this.options.maxPayloadBytes);
    const { resumed, left } = await sendEventBatch(this.scripts.get(), this.keys, { name, key, payload: encoded });
    return resumed + (left === 0 ? 0 : await this.resumeRest({ name, key, payload: encoded }, left));
  }

  /**
   * Resumes the runs still waiting for an event after a first call (send-event, or publish) left
   * `left` of them: runs that start waiting while the batches go are resumed too, but only as many
   * batches as the first call found left, so a steady stream of new waiters cannot keep the call
   * going. Resolves with how many resumed.
   */
  async resumeRest(request: EventRequest, left: number): Promise<number> {
    let resumed = 0;
    const batches = Math.ceil(left / EVENT_BATCH);
    for (let call = 0; call < batches; call++) {
      const batch = await sendEventBatch(this.scripts.get(), this.keys, request);
      resumed += batch.resumed;
      if (batch.left === 0) break;
    }
    return resumed;
  }
}
