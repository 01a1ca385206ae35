import type { DedupeOutcome, DedupeRequest } from '../../interfaces/dedupe.options';
import type { EnqueueRequest } from '../../interfaces/enqueue.options';
import type { LuaScripts } from '../lua.scripts';
import type { RedisKeys } from '../redis.keys';
import { enqueueFlags, firstTryOnly, newNonce, pushEnqueueOptions, type EnqueueSettings } from './enqueue.command';

/** One call of lua/enqueue-dedupe.lua: a run, its dedupe, and the caller's extras. */
export interface DedupeCall {
  request: EnqueueRequest;
  dedupe: DedupeRequest;
  /** The caller's trace context (see captureTrace); absent for none. */
  trace?: string;
  /** The id of the caller's own process's worker, if it has one (see EnqueueCall.selfWorkerId). */
  selfWorkerId?: string;
}

/** lua/enqueue-dedupe.lua's reply. */
export interface DedupeReply {
  outcome: DedupeOutcome;
  /** The run the call created or was folded into (the request's id only for 'created' and 'existing'). */
  runId: string;
  state: string;
  /** The call's number among those folded into the run (1: its creator; 0: 'existing'). */
  seq: number;
  /** A run created and handed to a parked worker (as EnqueueReply.handoff). */
  handoff?: { token: string; workerId: string };
}

/**
 * Runs lua/enqueue-dedupe.lua: the window decides, in Redis, whether this call creates a run, is
 * folded into the window's run, or replaces its input. Always with a nonce, so a try sent again
 * after a lost reply gets its first answer and writes nothing (see the script).
 */
export async function enqueueDeduped(
  scripts: LuaScripts,
  keys: RedisKeys,
  settings: EnqueueSettings,
  call: DedupeCall,
): Promise<DedupeReply> {
  const { request, dedupe } = call;
  const nonce = newNonce();
  const firstTry = firstTryOnly(request.idGenerated === true);
  const reply = await scripts.run<[DedupeOutcome, string, string, number, string?, string?]>(
    'enqueue-dedupe',
    [keys.run(request.id), keys.dedupe(request.workflow, dedupe.key)],
    () => dedupeArgs(keys, settings, call, nonce, firstTry()),
    { idempotent: true },
  );
  const [outcome, runId, state, seq, token, workerId] = reply;
  return { outcome, runId, state, seq: Number(seq), ...(token && workerId && { handoff: { token, workerId } }) };
}

/** ARGV of lua/enqueue-dedupe.lua: twelve values, then the options that differ from their defaults (as lua/enqueue.lua's). */
function dedupeArgs(keys: RedisKeys, settings: EnqueueSettings, call: DedupeCall, nonce: string, skipLook: boolean): (string | number)[] {
  const { request, dedupe, trace } = call;
  const args: (string | number)[] = [
    keys.base,
    request.id,
    request.workflow,
    request.input,
    enqueueFlags(settings, skipLook) + (call.selfWorkerId ?? ''),
    settings.lockMs,
    nonce,
    dedupe.mode,
    dedupe.key,
    dedupe.ttlMs,
    dedupe.replace ? '1' : '0',
    dedupe.maxWaitMs ?? '',
  ];
  // Debounce owns the delay (dedupeRequest refused delayMs and runAt with it).
  pushEnqueueOptions(args, request, trace, dedupe.mode === 'debounce' ? dedupe.ttlMs : request.delayMs);
  return args;
}
