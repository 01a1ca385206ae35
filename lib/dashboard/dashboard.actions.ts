import { Injectable } from '@nestjs/common';
import { QueueClient } from '../client/queue.client';
import type { RateLimit } from '../interfaces/rate-limit';
import { InvalidOptionError } from '../errors';

/** Most runs one "retry failed" of the dashboard retries. */
export const MAX_RETRY_FAILED = 1000;

/** What an action did, in words for the page. */
export interface ActionReply {
  ok: true;
  message: string;
}

const done = (message: string): ActionReply => ({ ok: true, message });

/**
 * The dashboard's actions, each one `QueueClient` call whose outcome is put in words. Bodies are
 * checked here (typed errors, answered 400) before any Redis call.
 */
@Injectable()
export class DashboardActions {
  constructor(private readonly client: QueueClient) {}

  async retry(id: string): Promise<ActionReply> {
    const { previousState } = await this.client.retry(id);
    return done(`Run ${id} is waiting again (it was ${previousState}); it resumes at the step that failed`);
  }

  async cancel(id: string): Promise<ActionReply> {
    const { cancelled, state, children } = await this.client.cancel(id, { reason: 'cancelled from the dashboard' });
    if (!cancelled) return done(`Run ${id} had already finished (${state}): nothing to cancel`);
    return done(`Cancelled run ${id}${children > 0 ? ` and ${children} child run${children === 1 ? '' : 's'} it waited for` : ''}`);
  }

  async remove(id: string): Promise<ActionReply> {
    return done((await this.client.remove(id)) ? `Removed run ${id}` : `There was no run ${id} to remove`);
  }

  async retryFailed(workflow: string, body: unknown): Promise<ActionReply> {
    const limit = field(body, 'limit') ?? 100;
    if (!Number.isInteger(limit) || (limit as number) < 1 || (limit as number) > MAX_RETRY_FAILED)
      throw new InvalidOptionError('limit', `must be an integer from 1 to ${MAX_RETRY_FAILED}`);
    const count = await this.client.retryAll({ workflow, state: 'failed', limit: limit as number });
    return done(`Retried ${count} failed run${count === 1 ? '' : 's'} of ${workflow}`);
  }

  async pause(workflow: string, body: unknown, pause: boolean): Promise<ActionReply> {
    const group = optionalString(body, 'group');
    const target = group === undefined ? workflow : `group ${group} of ${workflow}`;
    const changed = pause ? await this.client.pause({ workflow, group }) : await this.client.resume({ workflow, group });
    if (!changed) return done(`Nothing changed: ${target} was already ${pause ? 'paused' : 'running'}`);
    return done(pause ? `Paused ${target}: no run of it starts until it is resumed` : `Resumed ${target}`);
  }

  async limits(workflow: string, body: unknown): Promise<ActionReply> {
    const group = optionalString(body, 'group');
    const target = group === undefined ? workflow : group === '*' ? `every group of ${workflow}` : `group ${group} of ${workflow}`;
    const hasLimit = has(body, 'limit');
    if (hasLimit === has(body, 'rateLimit')) throw new InvalidOptionError('body', 'must give exactly one of limit and rateLimit');
    if (hasLimit) {
      const limit = field(body, 'limit') as number | null;
      const previous = await this.client.setLimits({ workflow, group, limit });
      return done(`Cap of ${target} ${limit === null ? 'removed' : `set to ${limit}`} (it was ${previous ?? 'none'})`);
    }
    const rateLimit = field(body, 'rateLimit') as RateLimit | null;
    const previous = await this.client.setLimits({ workflow, group, rateLimit });
    return done(
      `Rate limit of ${target} ${rateLimit === null ? 'removed' : `set to ${describeRate(rateLimit)}`} (it was ${previous ? describeRate(previous) : 'none'})`,
    );
  }

  async schedule(id: string, pause: boolean): Promise<ActionReply> {
    const info = pause ? await this.client.pauseSchedule(id) : await this.client.resumeSchedule(id);
    return done(pause ? `Paused schedule ${id}` : `Resumed schedule ${id}; next fire ${info.nextFireAt?.toISOString() ?? 'none'}`);
  }
}

function has(body: unknown, name: string): boolean {
  return body !== null && typeof body === 'object' && Object.prototype.hasOwnProperty.call(body, name);
}

function field(body: unknown, name: string): unknown {
  return has(body, name) ? (body as Record<string, unknown>)[name] : undefined;
}

function optionalString(body: unknown, name: string): string | undefined {
  const value = field(body, name);
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new InvalidOptionError(name, 'must be a string');
  return value;
}

function describeRate(rate: RateLimit): string {
  return `${rate.max} per ${rate.perMs} ms`;
}
