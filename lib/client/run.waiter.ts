import { BeforeApplicationShutdown, Injectable } from '@nestjs/common';
import type { Redis } from 'ioredis';
import type { LocalWaits } from '../interfaces/local.waits';
import { RunNotFoundError, SluiceError, WorkflowFailedError, type RunErrorInfo } from '../errors';
import { cancelledRunError } from '../errors/cancel.recorded';
import { watchRun, type WatchPublish } from '../redis/commands/watch.command';
import { decodePayload } from '../redis/payload.codec';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';
import { type Outcome, PendingWait, unknownError } from './pending.wait';
import { ProgressFeed } from './progress.feed';
import { RunInbox } from './run.inbox';

type Listener = (message: string) => void;

/** Run states after which nothing more is announced. */
const FINAL_STATES = new Set(['completed', 'failed', 'cancelled']);

/**
 * When an inbox wait first reads its run's record if no announcement came: a worker of an older
 * version (a rolling deploy) announces nothing on an inbox, so its runs are found by this read;
 * then every BACKSTOP_MS, as any wait.
 */
export const INBOX_FIRST_READ_MS = 1_000;

/** What an enqueue made for an inbox wait answers (see lua/enqueue.lua). */
export interface InboxEnqueueReply {
  /** This call created the run (so its inbox is the one named in it). */
  created: boolean;
  /** The run's state after the call. */
  state: string;
}

/**
 * Waits for runs to finish over one shared subscriber connection, in one of two ways:
 *
 * - the run's done channel ({@link wait}): subscribe, then read the stored record (a run that
 *   finished before the subscription resolves at once). The publish carries the outcome, so the
 *   usual wait costs those two round trips, and an unsubscribe.
 * - the process's inbox: subscribed once and kept live, it is named in the enqueue itself
 *   ({@link waitOnInbox}, for `run()`) or in the read of the record ({@link watchOnInbox}, for
 *   `wait()`), which is then the wait's only call: the announcement the run's finish publishes
 *   there carries the outcome.
 *
 * The calls a wait makes are bounded like every call (a failure rejects the wait with a typed
 * error); the re-reads after a reconnect and every BACKSTOP_MS only ever settle a wait with an
 * outcome: while Redis is away they fail quietly and the wait carries on (see PendingWait).
 */
@Injectable()
export class RunWaiter implements BeforeApplicationShutdown {
  private readonly listeners = new Map<string, { set: Set<Listener>; subscribed: Promise<void> }>();
  private readonly pending = new Set<(error: Error) => void>();
  private readonly inbox: RunInbox;
  /** The inbox's subscription, once asked for (again after a failure). */
  private inboxSubscribed?: Promise<void>;
  private everReady = false;
  private shutDown = false;

  constructor(
    private readonly connections: RedisConnections,
    private readonly scripts: LuaScriptsProvider,
    private readonly keys: RedisKeys,
  ) {
    this.inbox = new RunInbox(keys);
    connections.subscriber.onCreate((redis) => this.attach(redis));
  }

  /** This process's run() waits, for its worker to tell of the runs it completes (see LocalWaits). */
  get localWaits(): LocalWaits {
    return this.inbox;
  }

  /** This process's inbox channel (see RunInbox). */
  get inboxChannel(): string {
    return this.inbox.channel;
  }

  /** Whether the application is shutting down: no new waits (and no `run()`) are accepted. */
  get closed(): boolean {
    return this.shutDown;
  }

  /**
   * Whether {@link waitOnInbox} may be used now: the inbox is subscribed over a connection that
   * is up. If not, asks for the subscription (once at a time), for the calls that come later.
   */
  inboxReady(): boolean {
    if (this.inbox.live) return true;
    if (!this.inboxSubscribed && !this.shutDown) {
      const subscribed = (this.inboxSubscribed = this.listen(this.inbox.channel, this.inbox.onMessage));
      subscribed.catch(() => {
        this.unlisten(this.inbox.channel, this.inbox.onMessage);
        if (this.inboxSubscribed === subscribed) this.inboxSubscribed = undefined;
      });
    }
    return false;
  }

  /**
   * Waits for a run that `enqueue` creates, naming this process's inbox (its argument: the run's
   * 'waited' field) as where to announce its end. Call only when {@link inboxReady}. The wait
   * listens before the enqueue is sent, so the announcement cannot come too early, and usually
   * costs nothing but that enqueue. Any read of the record it makes (see {@link onInbox}) first
   * subscribes to the run's done channel and moves the announcement there, as {@link wait} does:
   * after a subscriber reconnect (the announcement may be lost), when the enqueue found the run
   * finished or someone else's (its record names their waiters, not this inbox), and when no
   * announcement came within {@link INBOX_FIRST_READ_MS} (a worker of an older version sends
   * none to an inbox; every BACKSTOP_MS after that).
   */
  waitOnInbox(runId: string, timeoutMs: number | undefined, enqueue: (waitedBy: string) => Promise<InboxEnqueueReply>): Promise<unknown> {
    return this.onInbox(runId, timeoutMs, async (inbox) => {
      const { created, state } = await enqueue(inbox);
      // The announcement will reach the inbox: no read, unless none comes for a while.
      return { ours: created, outcome: created && !FINAL_STATES.has(state) ? { settled: false } : undefined };
    });
  }

  /**
   * Waits for a run that may exist already, as {@link wait} does, but over this process's inbox:
   * its read of the record (lua/watch.lua) adds the inbox to the run's waiters, so the wait costs
   * that one call — no subscribe and unsubscribe of the run's done channel. Call only when
   * {@link inboxReady}. Later reads, as {@link waitOnInbox}'s, go over the done channel; the
   * run's other waiters are kept.
   */
  watchOnInbox(runId: string, timeoutMs: number | undefined): Promise<unknown> {
    return this.onInbox(runId, timeoutMs, async (inbox) => ({ ours: false, outcome: await this.readOutcome(runId, undefined, { inbox }) }));
  }

  /**
   * A wait on this process's inbox, started by `start` (given the inbox id): it says whether the
   * run's record names this inbox alone (`ours`: a read may then take it off, see lua/watch.lua)
   * and what it learnt of the run, if anything. An outcome it learnt while the inbox stayed live
   * stands, an unfinished run waiting for its announcement (read again after
   * {@link INBOX_FIRST_READ_MS}); otherwise the record is read over the done channel.
   */
  private onInbox(
    runId: string,
    timeoutMs: number | undefined,
    start: (inbox: string) => Promise<{ ours: boolean; outcome?: Outcome }>,
  ): Promise<unknown> {
    if (this.shutDown) return Promise.reject(new SluiceError('QueueModule is shutting down; no new waits'));
    return new Promise((resolve, reject) => {
      let onChannel: Promise<void> | undefined;
      let ours = false;
      const read = async (): Promise<Outcome> => {
        if (!onChannel) {
          const channel = this.keys.done(runId);
          onChannel = this.listen(channel, wait.onMessage);
          wait.onSettle(() => this.unlisten(channel, wait.onMessage));
          onChannel.catch(() => (onChannel = undefined)); // the next read subscribes again
        }
        await onChannel;
        return this.readOutcome(runId, undefined, ours ? 'only' : 'add');
      };
      const wait = this.track(runId, timeoutMs, read, resolve, reject);
      this.inbox.add(runId, wait.onMessage);
      wait.onSettle(() => this.inbox.remove(runId, wait.onMessage));
      const epoch = this.inbox.epoch;
      start(this.inbox.id)
        .then(async (started) => {
          ours = started.ours;
          if (wait.settled) return;
          const { outcome } = started;
          if (outcome && (outcome.settled || epoch === this.inbox.epoch)) return wait.firstRead(outcome, INBOX_FIRST_READ_MS);
          wait.firstRead(await read());
        })
        .catch((error) => wait.firstReadFailed(error));
    });
  }

  /**
   * Waits on the run's done channel: subscribes, then reads the stored record.
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
      const wait = this.track(runId, timeoutMs, () => this.readOutcome(runId, feed), resolve, reject);
      wait.onSettle(() => {
        this.unlisten(channel, wait.onMessage);
        if (feed) {
          feed.stop();
          this.unlisten(progressChannel!, feed.onMessage);
        }
      });
      const listening = Promise.all([this.listen(channel, wait.onMessage), feed && this.listen(progressChannel!, feed.onMessage)]);
      // A wait abandoned meanwhile (shutdown) sends nothing more: its caller was told no enqueue was sent.
      const started =
        typeof alongside === 'function' ? listening.then(() => !wait.settled && alongside()) : Promise.all([listening, alongside]);
      started
        .then(() => (wait.settled ? { settled: false as const } : this.readOutcome(runId, feed)))
        .then((outcome) => wait.firstRead(outcome))
        .catch((error) => wait.firstReadFailed(error));
    });
  }

  /** A wait of `runId` that reads the record with `read`, rejected by a shutdown until it settles. */
  private track(
    runId: string,
    timeoutMs: number | undefined,
    read: () => Promise<Outcome>,
    resolve: (value: unknown) => void,
    reject: (error: unknown) => void,
  ): PendingWait {
    const reads = { read, deliveredSoFar: () => this.deliveredSoFar() };
    const wait = new PendingWait(runId, timeoutMs, reads, resolve, reject);
    this.pending.add(wait.fail);
    wait.onSettle(() => this.pending.delete(wait.fail));
    return wait;
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
   * waiting. The read also marks the run as waited on its done channel, so its outcome (and
   * progress) will be published there (`publish`: see watchRun). `feed` gets the stored progress
   * first, so it is handed over before the outcome.
   */
  private async readOutcome(runId: string, feed?: ProgressFeed, publish: WatchPublish = 'add'): Promise<Outcome> {
    const run = await watchRun(this.scripts.get(), this.keys, runId, publish);
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
      let via: Redis;
      const subscribed = this.connections.subscriber
        .call('subscribe', (redis) => this.connections.channels.subscribe((via = redis), [channel]))
        .then(() => void (channel === this.inbox.channel && this.inbox.subscribedOn(via)));
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
    // Announcements sent to the inbox from now until it is subscribed again are lost.
    redis.on('close', () => this.inbox.closed(redis));
    // Every (re)connection starts with no subscriptions: take over the live ones, through the link
    // (bounded, and following a cluster's redirects; ioredis's own resubscribe is off). Then,
    // since publishes sent in between are lost, have every waiter re-read its run.
    redis.on('ready', () => {
      const reconnected = this.everReady;
      this.everReady = true;
      const channels = [...this.listeners.keys()];
      let via: Redis;
      const subscribed =
        channels.length > 0
          ? this.connections.subscriber
              .call('subscribe again', (ready) => this.connections.channels.subscribe((via = ready), channels))
              .then(() => channels.includes(this.inbox.channel) && this.inbox.subscribedOn(via))
          : Promise.resolve();
      void subscribed
        .catch(() => undefined)
        .then(() => reconnected && this.listeners.forEach(({ set }) => set.forEach((listener) => listener('reconnected'))));
    });
  }
}
