import { BeforeApplicationShutdown, Inject, Injectable } from '@nestjs/common';
import { RunNotFoundError, SluiceError, WaitTimeoutError, WorkflowFailedError, type RunErrorInfo } from '../errors';
import { RESOLVED_QUEUE_OPTIONS } from '../queue.constants';
import type { ResolvedQueueOptions } from '../queue.options';
import { decodePayload } from '../redis/payload.codec';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';

/** The record a worker publishes on a run's done channel (see lua/includes/common.lua). */
interface DoneMessage {
  v: 1;
  state: 'completed' | 'failed';
  workflow?: string;
  result?: unknown;
  error?: RunErrorInfo;
  undef?: boolean;
}

type Outcome = { settled: true; result: unknown } | { settled: false };

/**
 * Not a sleep standing in for an event: pub/sub is only a doorbell, and a publish sent while the
 * subscriber was reconnecting is gone. Re-reading the stored record this often bounds how long
 * such a loss can delay a waiter.
 */
const BACKSTOP_MS = 10_000;

/**
 * Waits for runs to finish over one shared subscriber connection: subscribe to the run's done
 * channel, then read the stored record (a run that finished before the subscription resolves at
 * once). The publish carries the outcome, so the usual wait costs those two round trips only.
 */
@Injectable()
export class RunWaiter implements BeforeApplicationShutdown {
  private readonly keys: RedisKeys;
  private readonly listeners = new Map<string, { set: Set<(message: string) => void>; subscribed: Promise<void> }>();
  private readonly pending = new Set<(error: Error) => void>();
  private attached = false;
  private closed = false;

  constructor(
    private readonly connections: RedisConnections,
    private readonly scripts: LuaScriptsProvider,
    @Inject(RESOLVED_QUEUE_OPTIONS) options: ResolvedQueueOptions,
  ) {
    this.keys = new RedisKeys(options.prefix, options.namespace);
  }

  /**
   * @param alongside work started together with the subscription (the enqueue of `run()`), so its
   *   round trip overlaps the subscribe instead of preceding it. The stored record is read once
   *   both are done, which still closes the race with a run that finished before the subscription.
   */
  wait(runId: string, timeoutMs: number | undefined, alongside?: Promise<unknown>): Promise<unknown> {
    if (this.closed) {
      alongside?.catch(() => undefined); // its failure is this wait's, reported below
      return Promise.reject(new SluiceError('QueueModule is shutting down; no new waits'));
    }
    const channel = this.keys.done(runId);
    return new Promise((resolve, reject) => {
      let done = false;
      const timers: NodeJS.Timeout[] = [];
      const finish = (settle: () => void) => {
        if (done) return;
        done = true;
        timers.forEach(clearTimeout);
        this.pending.delete(abandon);
        this.unlisten(channel, onMessage);
        settle();
      };
      const abandon = (error: Error) => finish(() => reject(error));
      this.pending.add(abandon);
      const check = () =>
        this.readOutcome(runId).then(
          (outcome) => outcome.settled && finish(() => resolve(outcome.result)),
          (error) => finish(() => reject(error)),
        );
      const onMessage = (message: string) => {
        const record = parseDone(message);
        if (!record) return void check(); // a peer on an older build publishes a bare "1"
        if (record.state === 'completed') finish(() => resolve(record.undef ? undefined : record.result));
        else finish(() => reject(new WorkflowFailedError(runId, record.workflow, record.error ?? unknownError())));
      };
      if (timeoutMs !== undefined) timers.push(setTimeout(() => finish(() => reject(new WaitTimeoutError(runId, timeoutMs))), timeoutMs));
      const backstop = () => timers.push(setTimeout(() => void check().then(() => !done && backstop()), BACKSTOP_MS));
      Promise.all([this.listen(channel, onMessage), alongside])
        .then(() => check())
        .then(() => !done && backstop())
        .catch((error) => finish(() => reject(error)));
    });
  }

  /** The connections close after this: settle every wait now rather than leave it hanging. */
  beforeApplicationShutdown(): void {
    this.closed = true;
    const error = new SluiceError('QueueModule is shutting down; the run carries on, but this wait was abandoned');
    [...this.pending].forEach((abandon) => abandon(error));
  }

  /**
   * The stored record decides: completed resolves, failed rejects, missing is an error, else keep
   * waiting. The read also marks the run as waited on, so its outcome will be published.
   */
  private async readOutcome(runId: string): Promise<Outcome> {
    const [state, result, error, workflow] = await this.scripts.get().run<(string | null)[]>('watch', [this.keys.run(runId)], [1]);
    if (!state) throw new RunNotFoundError(runId);
    if (state === 'completed') return { settled: true, result: decodePayload(result) };
    if (state === 'failed') throw new WorkflowFailedError(runId, workflow ?? undefined, decodePayload<RunErrorInfo>(error) ?? unknownError());
    return { settled: false };
  }

  /** Resolves once the channel's subscription is live — for every listener, not just the first. */
  private listen(channel: string, listener: (message: string) => void): Promise<void> {
    this.attach();
    let entry = this.listeners.get(channel);
    if (!entry) {
      entry = { set: new Set(), subscribed: this.connections.subscriber.subscribe(channel).then(() => undefined) };
      this.listeners.set(channel, entry);
    }
    entry.set.add(listener);
    return entry.subscribed;
  }

  private unlisten(channel: string, listener: (message: string) => void): void {
    const entry = this.listeners.get(channel);
    if (!entry?.set.delete(listener) || entry.set.size > 0) return;
    this.listeners.delete(channel);
    this.connections.subscriber.unsubscribe(channel).catch(() => undefined);
  }

  private attach(): void {
    if (this.attached) return;
    this.attached = true;
    const subscriber = this.connections.subscriber;
    subscriber.on('message', (channel: string, message: string) => this.listeners.get(channel)?.set.forEach((listener) => listener(message)));
    // After a reconnect, publishes sent in between are lost: have every waiter re-read its run.
    let connectedBefore = false;
    subscriber.on('ready', () => {
      if (connectedBefore) this.listeners.forEach(({ set }) => set.forEach((listener) => listener('reconnected')));
      connectedBefore = true;
    });
  }
}

function parseDone(message: string): DoneMessage | undefined {
  try {
    const record = decodePayload<DoneMessage>(message);
    return record && typeof record === 'object' && record.v === 1 ? record : undefined;
  } catch {
    return undefined;
  }
}

function unknownError(): RunErrorInfo {
  return { name: 'Error', message: 'unknown error' };
}
