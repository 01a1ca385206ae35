import type { QueueClient } from '../client/queue.client';
import type { PublishedEvent } from '../client/event.types';
import { summarize, type RunsView } from './dashboard.runs';

/** Most events of a name the runs page reads (their runs are shown together, newest event first). */
const EVENTS_READ = 100;

/**
 * The runs page filtered by event (`QueueClient.publish`): the runs one event id started, or those
 * the newest events of a name started, read through the events' records (`getEvent`,
 * `listEvents`: one round trip) and then each run (`get`, in parallel), never by scanning runs.
 * Shows what the records still hold (they are kept `resultTtlMs`); a run since removed is left
 * out. One page: at most `limit` runs, no cursor.
 */
export class EventRuns {
  constructor(private readonly client: QueueClient) {}

  async list(filter: { event?: string; eventId?: string }, limit: number): Promise<RunsView> {
    const events = await this.events(filter);
    const ids = events.flatMap((event) => event.runs.map((run) => run.runId)).slice(0, limit);
    const runs = await Promise.all(ids.map((id) => this.client.get(id)));
    return { runs: runs.filter((run) => run !== null).map(summarize), cursor: null };
  }

  private async events({ event, eventId }: { event?: string; eventId?: string }): Promise<PublishedEvent[]> {
    if (eventId !== undefined) {
      const found = await this.client.getEvent(eventId);
      return found && (event === undefined || found.name === event) ? [found] : [];
    }
    return this.client.listEvents({ name: event!, limit: EVENTS_READ });
  }
}
