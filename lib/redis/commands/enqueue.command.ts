import type { EnqueueRequest } from '../../interfaces/enqueue.options';
import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';
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
}

/** lua/enqueue.lua's reply. */
export interface EnqueueReply {
  /** Whether this call created the run (also after a lost reply: see newNonce); false: the id existed. */
  created: boolean;
  /** The run's state now ('active': fast-pathed to a parked worker). */
  state: string;
}

/**
 * Stores one run (lua/enqueue.lua). Sent again after a lost reply with the same nonce, so a
 * retry that finds the run its first try created still answers `created`; a generated id needs
 * no nonce (see EnqueueRequest.idGenerated).
 */
export async function enqueueRun(
  scripts: LuaScripts,
  keys: RedisKeys,
  settings: EnqueueSettings,
  call: EnqueueCall,
): Promise<EnqueueReply> {
  const runKeys = [keys.run(call.request.id), keys.leases, keys.limits, keys.seq];
  const generated = call.request.idGenerated === true;
  const nonce = generated ? '' : newNonce();
  const [created, state] = await scripts.run<[number, string]>('enqueue', runKeys, enqueueArgs(keys, settings, call, nonce), {
    idempotent: true,
  });
  // A generated id is this call's alone: a run under it is from a try whose reply was lost.
  return { created: created === 1 || generated, state };
}

/**
 * ARGV of lua/enqueue.lua. The trace is sent as ARGV[14] only when there is one, the run's time
 * limit as ARGV[15] and the compact flag as ARGV[16] (those before then '' if unused), so an
 * enqueue using none sends none of them.
 */
function enqueueArgs(keys: RedisKeys, settings: EnqueueSettings, call: EnqueueCall, nonce: string): (string | number)[] {
  const { request, trace } = call;
  const args = [
    keys.base,
    request.id,
    request.workflow,
    request.input,
    request.priority,
    request.delayMs,
    request.runAtMs ?? '',
    request.attempts,
    request.group ?? '',
    settings.fastPath ? 1 : 0,
    settings.lockMs,
    call.waited || 0,
    nonce,
  ];
  if (trace !== undefined || request.runTimeoutMs !== undefined || settings.compact) args.push(trace ?? '');
  if (request.runTimeoutMs !== undefined || settings.compact) args.push(request.runTimeoutMs ?? '');
  if (settings.compact) args.push(1);
  return args;
}

/**
 * Tells one enqueue call from any other when a retry finds the run existing (see lua/enqueue.lua).
 * Stored with each run: a shorter prefix than a call id's.
 */
export const newNonce = uniqueIds(6);
