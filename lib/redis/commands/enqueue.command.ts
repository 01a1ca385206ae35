import type { EnqueueRequest } from '../../interfaces/enqueue.options';
import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';
import { RECORD_DEFAULT_MAX_ATTEMPTS } from '../run.layout';
import { uniqueIds } from './call-id';

/** What the enqueue scripts' arguments take from the module options. */
export interface EnqueueSettings {
  fastPath: boolean;
  /** Lease length of a fast-pathed run, if the parked worker's announcement names none. */
  lockMs: number;
  /** Store lean run records: the namespace is at layout 4, or QueueModuleOptions.compactRunRecords. */
  compact: boolean;
}

/** One call of lua/enqueue.lua: one run, and what its caller asks on top. */
export interface EnqueueCall {
  request: EnqueueRequest;
  /**
   * Who waits on the run (run()), whose outcome is then to be published: '1' on its done channel,
   * or an inbox id (see RunInbox); '' for nobody.
   */
  waited: string;
  /** The caller's trace context (see captureTrace), stored with the run; absent for none. */
  trace?: string;
  /**
   * The id of the caller's own process's worker, if it has one: a run handed to that worker is
   * not published on its handoff channel, and the caller starts it from the reply (see LocalWorker).
   */
  selfWorkerId?: string;
}

/** lua/enqueue.lua's reply. */
export interface EnqueueReply {
  /** Whether this call created the run (also after a lost reply: see newNonce); false: the id existed. */
  created: boolean;
  /** The run's state now ('active': fast-pathed to a parked worker). */
  state: string;
  /**
   * A run handed to a parked worker: its lease token, and the worker's id. Published on that
   * worker's handoff channel, unless it is the caller's own (EnqueueCall.selfWorkerId), which
   * starts it from this reply alone (see LocalWorker).
   */
  handoff?: { token: string; workerId: string };
}

/**
 * Stores one run (lua/enqueue.lua). Sent again after a lost reply with the same nonce, so a
 * retry that finds the run its first try created still answers `created`; a generated id needs
 * no nonce (see EnqueueRequest.idGenerated), and its first try no look for an existing run.
 */
export async function enqueueRun(
  scripts: LuaScripts,
  keys: RedisKeys,
  settings: EnqueueSettings,
  call: EnqueueCall,
): Promise<EnqueueReply> {
  const runKeys = [keys.run(call.request.id)];
  const generated = call.request.idGenerated === true;
  const nonce = generated ? '' : newNonce();
  const firstTry = firstTryOnly(generated);
  const reply = await scripts.run<string>('enqueue', runKeys, () => enqueueArgs(keys, settings, call, nonce, firstTry()), {
    idempotent: true,
  });
  return parseEnqueueReply(reply, generated);
}

/** Reads lua/enqueue.lua's reply: '+' or '=', the state, and for a handoff ' <token> <worker id>'. */
export function parseEnqueueReply(reply: string, generated = false): EnqueueReply {
  // A generated id is this call's alone: a run under it is from a try whose reply was lost.
  const created = reply[0] === '+' || generated;
  const space = reply.indexOf(' ');
  if (space < 0) return { created, state: reply.slice(1) };
  const second = reply.indexOf(' ', space + 1);
  return { created, state: reply.slice(1, space), handoff: { token: reply.slice(space + 1, second), workerId: reply.slice(second + 1) } };
}

/**
 * Whether each try of a call may skip the look for an existing run: only the first try of a call
 * whose ids were all generated (no run can have one before it). Every later try looks, whatever
 * the reason it is sent again (a lost reply, a redirect, a library loaded meanwhile).
 */
export function firstTryOnly(generated: boolean): () => boolean {
  let tries = 0;
  return () => generated && tries++ === 0;
}

/** The flags lua/enqueue.lua and lua/enqueue-many.lua take: fast path, lean record, look for an existing run. */
export function enqueueFlags(settings: EnqueueSettings, skipLook: boolean): string {
  return `${settings.fastPath ? 1 : 0}${settings.compact ? 1 : 0}${skipLook ? 0 : 1}`;
}

/**
 * ARGV of lua/enqueue.lua: eight values, then only the options that differ from their defaults,
 * as name/value pairs (each argument costs Redis about what a small command does). A call without
 * options leaves off its trailing empty values (who waits, the nonce): a producer's common call.
 */
function enqueueArgs(keys: RedisKeys, settings: EnqueueSettings, call: EnqueueCall, nonce: string, skipLook: boolean): (string | number)[] {
  const { request, trace } = call;
  const args = [
    keys.base,
    request.id,
    request.workflow,
    request.input,
    // The caller's worker id rides on the flags: an argument more would cost Redis more.
    enqueueFlags(settings, skipLook) + (call.selfWorkerId ?? ''),
    settings.lockMs,
    call.waited,
    nonce,
  ];
  pushEnqueueOptions(args, request, trace, request.delayMs);
  // No option pushed: the trailing empty values (who waits, the nonce) are left off.
  if (args.length === 8) while (args.length > 6 && args[args.length - 1] === '') args.pop();
  return args;
}

/**
 * Appends the options of an enqueue that differ from their defaults, as the name/value pairs the
 * enqueue scripts read (enqueueOptions in lua/includes/enqueue.lua). `delayMs`: the run's delay
 * (a debounce sets its own).
 */
export function pushEnqueueOptions(args: (string | number)[], request: EnqueueRequest, trace: string | undefined, delayMs: number): void {
  if (request.priority !== 0) args.push('priority', request.priority);
  if (delayMs !== 0) args.push('delay', delayMs);
  if (request.runAtMs !== undefined) args.push('at', request.runAtMs);
  if (request.attempts !== RECORD_DEFAULT_MAX_ATTEMPTS) args.push('attempts', request.attempts);
  if (request.group) args.push('group', request.group);
  if (trace !== undefined) args.push('trace', trace);
  if (request.runTimeoutMs !== undefined) args.push('timeout', request.runTimeoutMs);
}

/**
 * Tells one enqueue call from any other when a retry finds the run existing (see lua/enqueue.lua).
 * Stored with each run: a shorter prefix than a call id's.
 */
export const newNonce = uniqueIds(6);
