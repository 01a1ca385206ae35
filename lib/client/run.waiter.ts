import { BeforeApplicationShutdown, Injectable } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { RedisConnectionError, RunNotFoundError, SluiceError, WaitTimeoutError, WorkflowFailedError, type RunErrorInfo } from '../errors';
import { cancelledRunError } from '../errors/cancel.recorded';
import { watchRun } from '../redis/commands/watch.command';
import { decodePayload } from '../redis/payload.codec';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';
import { ProgressFeed } from './progress.feed';

/** The record a worker publishes on a run's done channel (see finishRun in lua/includes/finish.lua). */
interface DoneMessage {
  v: 1;
  state: 'completed' | 'failed' | 'cancelled';
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

type Listener = (message: string) => void;

/**
 * Waits for runs to finish over one shared subscriber connection: subscribe to the run's done
 * channel, then read the stored record (a run that finished before the subscription resolves at
 * once). The publish carries the outcome, so the usual wait costs those two round trips only.
 * Those two calls are bounded like every call (a failure rejects the wait with a typed error);
 * the re-reads after a reconnect and every {@link BACKSTOP_MS} only ever settle a wait with an
 * outcome: while Redis is away they fail quietly and the wait carries on.
 */
@Injectable()
export class RunWaiter implements BeforeApplicationShutdown {
  private readonly listeners = new Map<string, { set: Set<Listener>; subscribed: Promise<void> }>();
  private readonly pending = new Set<(error: Error) => void>();
  private everReady = false;
  private shutDown = false;

  constructor(
    private readonly connections: RedisConnections,
    private readonly scripts: LuaScriptsProvider,
    private readonly keys: RedisKeys,
  ) {
    connections.subscriber.onCreate((redis) => this.attach(redis));
  }

  /** Whether the application is shutting down: no new waits (and no `run()`) are accepted. */
  get closed(): boolean {
    return this.shutDown;
  }

  /**
   * @param alongside work started together with the subscription (the enqueue of `run()`), so its
   *   round trip overlaps the subscribe instead of preceding it. The stored record is read once
   *   both are done, which still closes the race with a run that finished before the subscription.
   *   Given as a function, it is started only once the subscription is live: for a run whose
   *   record may be gone by the time of that read (retention by count), the announcement, which
   *   carries the outcome, must not be missed (see mayOverlapEnqueue).
   * @param onProgress given only: the wait also subscribes to the run's progress channel, hands
   *   over the stored value its first read finds, then each published one (see {@link ProgressFeed}).
   */
  wait(
    runId: string,
    timeoutMs: number | undefined,
    alongside?: Promise<unknown> | (() => Promise<unknown>),
    onProgress?: (value: unknown) => void,
  ): Promise<unknown> {
    if (this.shutDown) {
      if (typeof alongside !== 'function') alongside?.catch(() => undefined); // its failure is this wait's, reported below
      return Promise.reject(new SluiceError('QueueModule is shutting down; no new waits'));
    }
    const channel = this.keys.done(runId);
    const feed = onProgress && new ProgressFeed(onProgress);
    const progressChannel = feed && this.keys.progress(runId);
    return new Promise((resolve, reject) => {
      let done = false;
      let firstReadDone = false;
      let timedOut = false;
      const timers: NodeJS.Timeout[] = [];
      const finish = (settle: () => void) => {
        if (done) return;
        done = true;
        timers.forEach(clearTimeout);
        this.pending.delete(abandon);
        this.unlisten(channel, onMessage);
        if (feed) {
          feed.stop();
          this.unlisten(progressChannel!, feed.onMessage);
        }
        settle();
      };
      const abandon = (error: Error) => finish(() => reject(error));
      this.pending.add(abandon);
      const expire = () => finish(() => reject(new WaitTimeoutError(runId, timeoutMs!)));
      // A background re-read settles the wait only with an outcome; a failed read is retried later.
      // Before the first read, "no such run" means nothing: run() enqueues once it is subscribed,
      // so a re-read on a subscriber reconnect may come before the enqueue lands.
      const reread = () =>
        this.readOutcome(runId, feed).then(
          (outcome) => outcome.settled && finish(() => resolve(outcome.result)),
          (error) =>
            !(error instanceof RedisConnectionError) &&
            (firstReadDone || !(error instanceof RunNotFoundError)) &&
            finish(() => reject(error)),
        );
      const onMessage = (message: string) => {
        const record = parseDone(message);
        if (!record) return void reread(); // a peer on an older build publishes a bare "1", or a reconnect
        if (record.state === 'completed') finish(() => resolve(record.undef ? undefined : record.result));
        else if (record.state === 'cancelled') finish(() => reject(cancelledRunError(runId, record.error)));
        else finish(() => reject(new WorkflowFailedError(runId, record.workflow, record.error ?? unknownError())));
      };
      // The clock runs from the call, but a run the first read finds finished always resolves.
      const onTimeout = () => {
        timedOut = true;
        if (firstReadDone) expire();
      };
      if (timeoutMs !== undefined) timers.push(setTimeout(onTimeout, timeoutMs));
      const backstop = () => timers.push(setTimeout(() => void reread().then(() => !done && backstop()), BACKSTOP_MS));
      const listening = Promise.all([this.listen(channel, onMessage), feed && this.listen(progressChannel!, feed.onMessage)]);
      // A wait abandoned meanwhile (shutdown) sends nothing more: its caller was told no enqueue was sent.
      const started = typeof alongside === 'function' ? listening.then(() => !done && alongside()) : Promise.all([listening, alongside]);
      started
        .then(() => (done ? { settled: false as const } : this.readOutcome(runId, feed)))
        .then((outcome) => {
          firstReadDone = true;
          if (outcome.settled) finish(() => resolve(outcome.result));
          else if (timedOut) expire();
          else if (!done) backstop();
        })
        .catch(async (error) => {
          // The record may have been deleted (retention by count) by the very call that announced
          // the run to this live subscription: let that announcement arrive before saying "no such run".
          if (error instanceof RunNotFoundError && !done) await this.deliveredSoFar();
          finish(() => reject(error));
        });
    });
  }

  /** The connections close after this: settle every wait now rather than leave it hanging. */
  beforeApplicationShutdown(): void {
    this.shutDown = true;
    // One error per wait: run() names its run on the error it rejects with.
    [...this.pending].forEach((abandon) =>
      abandon(new SluiceError('QueueModule is shutting down; the run carries on, but this wait was abandoned')),
    );
  }

  /**
   * Resolves once every message Redis sent this process's subscriber before now was handed to
   * the listeners: a PING's reply comes after them on that connection, and a pushed message is
   * dispatched as soon as it is parsed. Never rejects (a subscriber that cannot answer has nothing
   * to deliver, and a reconnect has every waiter read its run again).
   */
  private deliveredSoFar(): Promise<void> {
    return this.connections.subscriber
      .call('ping', (redis) => redis.ping())
      .then(
        () => undefined,
        () => undefined,
      );
  }

  /**
   * The stored record decides: completed resolves, failed rejects, missing is an error, else keep
   * waiting. The read also marks the run as waited on, so its outcome (and progress) will be
   * published. `feed` gets the stored progress first, so it is handed over before the outcome.
   */
  private async readOutcome(runId: string, feed?: ProgressFeed): Promise<Outcome> {
    const run = await watchRun(this.scripts.get(), this.keys, runId, true);
    if (!run) throw new RunNotFoundError(runId);
    const { state, result, error, workflow } = run;
    feed?.read(run.progress, run.progressSeq);
    if (state === 'completed') return { settled: true, result: decodePayload(result) };
    if (state === 'failed')
      throw new WorkflowFailedError(runId, workflow ?? undefined, decodePayload<RunErrorInfo>(error) ?? unknownError());
    if (state === 'cancelled') throw cancelledRunError(runId, decodePayload<RunErrorInfo>(error));
    return { settled: false };
  }

  /** Resolves once the channel's subscription is live — for every listener, not just the first. */
  private listen(channel: string, listener: Listener): Promise<void> {
    let entry = this.listeners.get(channel);
    if (!entry) {
      const subscribed = this.connections.subscriber
        .call('subscribe', (redis) => this.connections.channels.subscribe(redis, [channel]))
        .then(() => undefined);
      const created = { set: new Set<Listener>(), subscribed };
      // A failed subscription must not be reused by the next wait on the channel.
      subscribed.catch(() => this.listeners.get(channel) === created && this.listeners.delete(channel));
      this.listeners.set(channel, (entry = created));
    }
    entry.set.add(listener);
    return entry.subscribed;
  }

  private unlisten(channel: string, listener: Listener): void {
    const entry = this.listeners.get(channel);
    if (!entry?.set.delete(listener) || entry.set.size > 0) return;
    this.listeners.delete(channel);
    if (this.shutDown) return;
    this.connections.subscriber
      .call('unsubscribe', (redis) => this.connections.channels.unsubscribe(redis, [channel]))
      .catch(() => undefined);
  }

  /** Wires a subscriber connection (a new one also after the old one was replaced). */
  private attach(redis: Redis): void {
    redis.on(this.connections.channels.messageEvent, (channel: string, message: string) =>
      this.listeners.get(channel)?.set.forEach((listener) => listener(message)),
    );
    // Every (re)connection starts with no subscriptions: take over the live ones, through the link
    // (bounded, and following a cluster's redirects; ioredis's own resubscribe is off). Then,
    // since publishes sent in between are lost, have every waiter re-read its run.
    redis.on('ready', () => {
      const reconnected = this.everReady;
      this.everReady = true;
      const channels = [...this.listeners.keys()];
      const subscribed =
        channels.length > 0
          ? this.connections.subscriber.call('subscribe again', (ready) => this.connections.channels.subscribe(ready, channels))
          : Promise.resolve();
      void subscribed
        .catch(() => undefined)
        .then(() => reconnected && this.listeners.forEach(({ set }) => set.forEach((listener) => listener('reconnected'))));
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
