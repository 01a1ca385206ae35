import { RedisCommandError } from '../../errors';
import type { EnqueueRequest } from '../../interfaces/enqueue.options';
import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';
import { enqueueFlags, firstTryOnly, newNonce, type EnqueueSettings } from './enqueue.command';

/**
 * Most runs one enqueue-many script call stores, and most bytes of input it carries: one call
 * runs alone in Redis (about 5 µs a run), so a chunk keeps it to a few milliseconds. Bigger
 * batches are several calls, pipelined in one round trip.
 */
const ENQUEUE_CHUNK_RUNS = 500;
const ENQUEUE_CHUNK_BYTES = 1 << 20;

/** Runs of one workflow to store (lua/enqueue-many.lua). */
export interface EnqueueManyRequest {
  workflow: string;
  /** Each run as lua/enqueue.lua would take it, in order; its `workflow` is the request's. */
  runs: EnqueueRequest[];
  /** The caller's trace context (see captureTrace), stored with every run; absent for none. */
  trace?: string;
}

/** Splits a batch into the chunks of one enqueue-many call each (see {@link ENQUEUE_CHUNK_RUNS}). */
export function enqueueChunks(requests: EnqueueRequest[]): EnqueueRequest[][] {
  const chunks: EnqueueRequest[][] = [];
  let chunk: EnqueueRequest[] = [];
  let bytes = 0;
  for (const request of requests) {
    if (chunk.length === ENQUEUE_CHUNK_RUNS || (chunk.length > 0 && bytes + request.input.length > ENQUEUE_CHUNK_BYTES)) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(request);
    bytes += request.input.length;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/**
 * Stores one chunk (at most {@link ENQUEUE_CHUNK_RUNS} runs, see enqueueChunks) in one call.
 * Repeating it is harmless (run ids, and the call's nonce).
 * @returns per run: whether this call created it (false: the id existed, or came earlier in the chunk)
 */
export async function enqueueChunk(
  scripts: LuaScripts,
  keys: RedisKeys,
  settings: EnqueueSettings,
  request: EnqueueManyRequest,
): Promise<boolean[]> {
  const nonce = nonceFor(request.runs);
  const firstTry = firstTryOnly(nonce === '');
  const created = await scripts.run<number[]>('enqueue-many', manyKeys(keys), () => manyArgs(keys, settings, request, nonce, firstTry()), {
    idempotent: true,
  });
  return createdFlags(request.runs, created);
}

/** A call's nonce, or '' when every id in it was generated (see EnqueueRequest.idGenerated). */
function nonceFor(runs: EnqueueRequest[]): string {
  return runs.every((run) => run.idGenerated) ? '' : newNonce();
}

/** The script's flags per run; a generated id found existing is this call's own, from a lost reply. */
function createdFlags(runs: EnqueueRequest[], flags: number[]): boolean[] {
  return runs.map((run, k) => flags[k] === 1 || run.idGenerated === true);
}

/**
 * Stores any number of runs in one round trip: a pipeline of one enqueue-many call per chunk,
 * sharing one nonce (the whole pipeline is what a retry sends again).
 * @returns per run, in order: as {@link enqueueChunk}
 * @throws RedisCommandError if any call of the pipeline failed
 */
export async function enqueueMany(
  scripts: LuaScripts,
  keys: RedisKeys,
  settings: EnqueueSettings,
  request: EnqueueManyRequest,
): Promise<boolean[]> {
  const nonce = nonceFor(request.runs);
  const chunks = enqueueChunks(request.runs);
  // Every chunk of a pipeline sent again looks for existing runs: some may have run the first time.
  const firstTry = firstTryOnly(nonce === '');
  const replies = await scripts.pipeline(
    'enqueueMany',
    (pipeline) => {
      const skipLook = firstTry();
      chunks.forEach((runs) =>
        scripts.queue(pipeline, 'enqueue-many', manyKeys(keys), manyArgs(keys, settings, { ...request, runs }, nonce, skipLook)),
      );
    },
    { idempotent: true },
  );
  return chunks.flatMap((chunk, index) => {
    const [error, created] = replies[index] ?? [new Error('no reply')];
    if (error) throw new RedisCommandError('enqueueMany', error);
    return createdFlags(chunk, created as number[]);
  });
}

function manyKeys(keys: RedisKeys): string[] {
  return [keys.leases, keys.limits, keys.seq];
}

/** A run's options as lua/enqueue-many.lua takes them, in its order. */
function runOptions(request: EnqueueRequest): (string | number)[] {
  return [request.priority, request.delayMs, request.runAtMs ?? '', request.attempts, request.group ?? '', request.runTimeoutMs ?? ''];
}

/** Whether every request of the chunk has the first one's options (the common batch). */
function sameOptions(chunk: EnqueueRequest[]): boolean {
  const [a] = chunk;
  return chunk.every(
    (b) =>
      b.priority === a.priority &&
      b.delayMs === a.delayMs &&
      b.runAtMs === a.runAtMs &&
      b.attempts === a.attempts &&
      b.group === a.group &&
      b.runTimeoutMs === a.runTimeoutMs,
  );
}

/**
 * ARGV of lua/enqueue-many.lua for one chunk. A chunk whose runs share their options sends them
 * once: encoding the arguments is a large part of what a bulk enqueue costs the client.
 */
function manyArgs(
  keys: RedisKeys,
  settings: EnqueueSettings,
  request: EnqueueManyRequest,
  nonce: string,
  skipLook: boolean,
): (string | number)[] {
  const { runs } = request;
  const args: (string | number)[] = [
    keys.base,
    request.workflow,
    enqueueFlags(settings, skipLook),
    settings.lockMs,
    nonce,
    request.trace ?? '',
  ];
  if (sameOptions(runs)) {
    args.push(2, ...runOptions(runs[0]));
    for (const run of runs) args.push(run.id, run.input);
  } else {
    args.push(8);
    for (const run of runs) args.push(run.id, run.input, ...runOptions(run));
  }
  return args;
}
