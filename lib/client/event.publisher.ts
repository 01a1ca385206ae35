import { Inject, Injectable } from '@nestjs/common';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { EventIdConflictError, InvalidOptionError, RedisCommandError } from '../errors';
import { RESOLVED_QUEUE_OPTIONS } from '../interfaces/queue.constants';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { publishEvent, type PublishReply } from '../redis/commands/publish.command';
import { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import { encodePayload } from '../redis/payload.codec';
import { RedisConnections } from '../redis/redis.connections';
import { RedisKeys } from '../redis/redis.keys';
import { checkInteger } from '../util/duration';
import { checkId } from '../util/names';
import { checkOptionKeys } from '../util/option-keys';
import { newRunId } from '../workflow/run-id';
import { checkInput } from '../workflow/schema.validate';
import { checkEventId, checkEventName } from '../workflow/trigger.options';
import { LIST_EVENTS_OPTIONS, PUBLISH_OPTIONS, type ListEventsOptions, type PublishedEvent, type PublishOptions } from './event.types';
import { RunEnqueuer } from './run.enqueuer';
import { RunSignals } from './run.signals';

/** What a publish did, before QueueClient makes handles of its runs. */
export type Published = PublishReply & { id: string };

/**
 * Event triggers' producer side (`QueueClient.publish`, `getEvent`, `listEvents`): one script call
 * starts a run of every workflow subscribed in Redis to the event (so a producer without the
 * workflows' classes publishes as well) and resumes the runs waiting for it (as `sendEvent`;
 * more than one batch of them: send-event calls follow). Input is checked first; nothing is
 * written on bad input.
 */
@Injectable()
export class EventPublisher {
  constructor(
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
    private readonly registry: WorkflowRegistry,
    private readonly scripts: LuaScriptsProvider,
    private readonly keys: RedisKeys,
    private readonly connections: RedisConnections,
    private readonly enqueuer: RunEnqueuer,
    private readonly signals: RunSignals,
  ) {}

  async publish(name: string, payload: unknown, opts: PublishOptions | undefined): Promise<Published> {
    checkEventName(name, 'event name');
    if (opts !== undefined && (opts === null || typeof opts !== 'object'))
      throw new InvalidOptionError('opts', 'must be an object { id?, key? }');
    checkOptionKeys(opts, PUBLISH_OPTIONS, 'publish opts');
    const id = opts?.id === undefined ? newRunId() : checkEventId(opts.id, 'opts.id');
    const key = opts?.key === undefined || opts.key === '' ? '' : checkId(opts.key, 'opts.key');
    const encoded = encodePayload(payload, 'event payload', this.options.maxPayloadBytes);
    // The schemas of the subscribers this process declares (as enqueue checks the input schema it knows).
    for (const workflow of this.registry.all()) {
      if (!workflow.on.includes(name)) continue;
      const checking = checkInput(workflow, payload, 'payload');
      if (checking) await checking;
    }
    const request = { name, id, key, payload: encoded, keepMs: this.options.defaults.resultTtlMs };
    const reply = await publishEvent(this.scripts.get(), this.keys, this.enqueuer.settings, request);
    if (reply.name !== name) throw new EventIdConflictError(id, reply.name, name);
    if (reply.left > 0) reply.resumed += await this.signals.resumeRest({ name, key, payload: encoded }, reply.left);
    return { ...reply, id };
  }

  /** The event's record, or `null` once it expired (or never was). */
  async get(id: string): Promise<PublishedEvent | null> {
    checkEventId(id, 'event id');
    const [events] = await this.read([id]);
    return events ?? null;
  }

  /** The newest events published under a name, whose records are still kept. */
  async list(opts: ListEventsOptions): Promise<PublishedEvent[]> {
    if (opts === null || typeof opts !== 'object') throw new InvalidOptionError('opts', 'must be an object { name, limit? }');
    checkOptionKeys(opts, LIST_EVENTS_OPTIONS, 'listEvents opts');
    const name = checkEventName(opts.name, 'opts.name');
    const limit = opts.limit === undefined ? 20 : checkInteger(opts.limit, 'opts.limit', 1, 100);
    const ids = await this.connections.command.call('listEvents', (redis) => redis.zrevrange(this.keys.publishedBy(name), 0, limit - 1), {
      idempotent: true,
    });
    return (await this.read(ids)).filter((event): event is PublishedEvent => event !== undefined);
  }

  /** The records of `ids`, in one round trip; undefined where one expired. */
  private async read(ids: string[]): Promise<(PublishedEvent | undefined)[]> {
    if (ids.length === 0) return [];
    const replies = await this.connections.command.call(
      'getEvent',
      (redis) => {
        const pipeline = redis.pipeline();
        for (const id of ids) pipeline.hmget(this.keys.published(id), 'name', 'at', 'runs');
        return pipeline.exec();
      },
      { idempotent: true },
    );
    return ids.map((id, i) => {
      const [error, values] = replies?.[i] ?? [new Error('no reply')];
      if (error) throw new RedisCommandError('getEvent', error);
      const [name, at, runs] = values as (string | null)[];
      if (!name) return undefined;
      const words = (runs ?? '').split(' ').filter(Boolean);
      const list: PublishedEvent['runs'] = [];
      for (let k = 0; k + 1 < words.length; k += 3) list.push({ workflow: words[k], runId: words[k + 1] });
      return { id, name, publishedAt: new Date(Number(at)), runs: list };
    });
  }
}
