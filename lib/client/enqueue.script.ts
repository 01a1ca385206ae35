import { randomBytes } from 'node:crypto';
import type { RedisKeys } from '../redis/redis.keys';
import type { EnqueueRequest } from '../interfaces/enqueue.options';

/** What the enqueue script's arguments take from the module options. */
export interface EnqueueSettings {
  fastPath: boolean;
  /** Lease length of a fast-pathed run, if the parked worker's announcement names none. */
  lockMs: number;
  /** Store compact run records (QueueModuleOptions.compactRunRecords). */
  compact: boolean;
}

/** KEYS of lua/enqueue.lua for one request. */
export function enqueueKeys(keys: RedisKeys, request: EnqueueRequest): string[] {
  return [keys.run(request.id), keys.leases, keys.limits, keys.seq];
}

/**
 * ARGV of lua/enqueue.lua for one request. `waited`: the caller waits on the run (its outcome is
 * published); `trace`: the caller's trace context (see captureTrace), sent as ARGV[14] only when
 * there is one, the request's run time limit as ARGV[15] and the compact flag as ARGV[16] (those
 * before then '' if unused), so an enqueue using none sends none of them.
 */
export function enqueueArgs(keys: RedisKeys, settings: EnqueueSettings, request: EnqueueRequest, nonce: string, waited = false, trace?: string): (string | number)[] {
  const args = [
    keys.base, request.id, request.workflow, request.input, request.priority, request.delayMs,
    request.runAtMs ?? '', request.attempts, request.group ?? '', settings.fastPath ? 1 : 0, settings.lockMs,
    waited ? 1 : 0, nonce,
  ];
  if (trace !== undefined || request.runTimeoutMs !== undefined || settings.compact) args.push(trace ?? '');
  if (request.runTimeoutMs !== undefined || settings.compact) args.push(request.runTimeoutMs ?? '');
  if (settings.compact) args.push(1);
  return args;
}

/**
 * Most runs one enqueue-many script call stores, and most bytes of input it carries: one call
 * runs alone in Redis (about 5 µs a run), so a chunk keeps it to a few milliseconds. Bigger
 * batches are several calls, pipelined in one round trip.
 */
export const ENQUEUE_CHUNK_RUNS = 500;
export const ENQUEUE_CHUNK_BYTES = 1 << 20;

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

/** KEYS of lua/enqueue-many.lua. */
export function enqueueManyKeys(keys: RedisKeys): string[] {
  return [keys.leases, keys.limits, keys.seq];
}

/** A run's options as lua/enqueue-many.lua takes them, in its order. */
function runOptions(request: EnqueueRequest): (string | number)[] {
  return [request.priority, request.delayMs, request.runAtMs ?? '', request.attempts, request.group ?? '', request.runTimeoutMs ?? ''];
}

/** Whether every request of the chunk has the first one's options (the common batch). */
function sameOptions(chunk: EnqueueRequest[]): boolean {
  const [a] = chunk;
  return chunk.every((b) => b.priority === a.priority && b.delayMs === a.delayMs && b.runAtMs === a.runAtMs && b.attempts === a.attempts && b.group === a.group && b.runTimeoutMs === a.runTimeoutMs);
}

/**
 * ARGV of lua/enqueue-many.lua for one chunk of requests of one workflow. A chunk whose runs
 * share their options sends them once: encoding the arguments is a large part of what a bulk
 * enqueue costs the client.
 */
export function enqueueManyArgs(keys: RedisKeys, settings: EnqueueSettings, workflow: string, chunk: EnqueueRequest[], nonce: string, trace?: string): (string | number)[] {
  const args: (string | number)[] = [keys.base, workflow, settings.fastPath ? 1 : 0, settings.lockMs, nonce, trace ?? '', settings.compact ? 1 : 0];
  if (sameOptions(chunk)) {
    args.push(2, ...runOptions(chunk[0]));
    for (const request of chunk) args.push(request.id, request.input);
  } else {
    args.push(8);
    for (const request of chunk) args.push(request.id, request.input, ...runOptions(request));
  }
  return args;
}

/** Tells this call's enqueue from any other when a retry finds the run existing (see lua/enqueue.lua). */
const NONCE_PREFIX = randomBytes(6).toString('base64url');
let nonceCount = 0;
export function newNonce(): string {
  return NONCE_PREFIX + (nonceCount++).toString(36);
}
