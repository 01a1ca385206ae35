import { OutcomeUnknownError } from '../errors';
import type { EnqueueRequest } from '../interfaces/enqueue.options';
import { enqueueChunks } from '../redis/commands/enqueue-many.command';

/**
 * Most runs one batch holds before it goes out: several smaller calls in flight let Node prepare
 * one while Redis runs another (as for commits, see COMMIT_BATCH_CAP).
 */
const MAX_BATCH = 16;

interface Pending {
  request: EnqueueRequest;
  resolve(created: boolean): void;
  reject(error: unknown): void;
}

/** How a batcher stores runs: one by one (lua/enqueue.lua) and a chunk of one workflow's at once (lua/enqueue-many.lua). */
export interface EnqueueSender {
  one(request: EnqueueRequest): Promise<boolean>;
  chunk(workflow: string, requests: EnqueueRequest[]): Promise<boolean[]>;
}

/**
 * Coalesces concurrent `enqueue()` calls into enqueue-many script calls. A call made while no
 * other is in flight goes out at once, on its own (a lone enqueue waits for nothing); calls made
 * while some are in flight wait for the end of the event-loop turn (one `setImmediate`) and go
 * out together, one script call per workflow and chunk — under load, Redis pays the per-call
 * cost once per batch instead of once per run. Each run is stored exactly as alone (see
 * lua/enqueue-many.lua); a batch that fails fails each of its calls, each error naming its own
 * run id where the outcome is unknown.
 */
export class EnqueueBatcher {
  private inFlight = 0;
  private pending: Pending[] = [];
  private scheduled = false;

  constructor(private readonly sender: EnqueueSender) {}

  store(request: EnqueueRequest): Promise<boolean> {
    if (this.inFlight === 0) return this.track(this.sender.one(request));
    return new Promise<boolean>((resolve, reject) => {
      this.pending.push({ request, resolve, reject });
      if (this.pending.length >= MAX_BATCH) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.flush();
        });
      }
    });
  }

  private flush(): void {
    if (this.pending.length === 0) return;
    const byWorkflow = new Map<string, Pending[]>();
    for (const entry of this.pending) {
      const list = byWorkflow.get(entry.request.workflow);
      if (list) list.push(entry);
      else byWorkflow.set(entry.request.workflow, [entry]);
    }
    this.pending = [];
    for (const [workflow, entries] of byWorkflow) {
      const byRequest = new Map(entries.map((entry) => [entry.request, entry]));
      for (const chunk of enqueueChunks(entries.map((entry) => entry.request))) {
        const callers = chunk.map((request) => byRequest.get(request)!);
        const sent = chunk.length === 1 ? this.sender.one(chunk[0]).then((created) => [created]) : this.sender.chunk(workflow, chunk);
        this.track(sent).then(
          (created) => callers.forEach((caller, index) => caller.resolve(created[index])),
          (error: unknown) => callers.forEach((caller) => caller.reject(forRun(error, caller.request.id))),
        );
      }
    }
  }

  private track<T>(call: Promise<T>): Promise<T> {
    this.inFlight++;
    const settled = () => void this.inFlight--;
    call.then(settled, settled);
    return call;
  }
}

/** The batch's error as this run's: an unknown outcome names the run, as a lone enqueue's does. */
function forRun(error: unknown, runId: string): unknown {
  if (!(error instanceof OutcomeUnknownError)) return error;
  const own = new OutcomeUnknownError(error.operation, error.message.slice(error.operation.length + 2), { cause: error.cause ?? error });
  own.runId = runId;
  return own;
}
