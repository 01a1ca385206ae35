import type { Redis } from 'ioredis';

export type Role = 'command' | 'blocking' | 'subscriber';

/** How one call over a {@link RedisLink} is bounded. */
export interface CallOptions {
  /** Bound of the whole call, waiting for the connection and retries included. Default: the link's. */
  timeoutMs?: number;
  /** Longest wait for one reply once sent (the blocking read: its block time plus grace). Default: what is left of `timeoutMs`. */
  replyTimeoutMs?: number;
  /** Send again after a lost reply while time is left: only for calls whose repetition is harmless. */
  idempotent?: boolean;
  /** While waiting for the connection, give up at its first error instead of at the deadline (bootstrap). */
  failFast?: boolean;
}

/** Where a link on a Redis Cluster reports a `MOVED` reply (see SlotOwner). */
export interface RedirectListener {
  moved(to: string): void;
}

/** One call's sending over a connection; `retry`: whether an earlier try of the call lost its reply (a script may look for its effects). */
export type Send<T> = (redis: Redis, retry: boolean) => Promise<T>;

/**
 * Whether ioredis would send a command now. Its status stays 'ready' for a moment after the
 * socket dies (a reset: the socket is destroyed at once, its 'close' handled a tick later), and a
 * command sent then is refused ("Stream isn't writeable"), so the socket is looked at too.
 */
export function canSend(redis: Redis): boolean {
  return redis.status === 'ready' && (redis as unknown as { stream?: { writable?: boolean } }).stream?.writable !== false;
}

export function replyDeadline(deadline: number, options: CallOptions): number {
  return options.replyTimeoutMs === undefined ? deadline : Math.min(deadline, Date.now() + options.replyTimeoutMs);
}

export function pauseUntil(ms: number, deadline: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(ms, deadline - Date.now()))));
}

/** Closes a connection at once, its socket included: one that stopped answering may never close on its own. */
export function destroy(redis: Redis): void {
  redis.disconnect();
  (redis as unknown as { stream?: { destroy?: () => void } }).stream?.destroy?.();
}

/**
 * Runs `send`, whose commands over `redis` then leave in one socket write: Node writes each command
 * with a system call of its own otherwise, which on a loaded or virtualised machine costs about as
 * much as a short script's whole run in Redis. Only for commands sent synchronously inside `send`.
 */
export function inOneWrite<T>(redis: Redis, send: () => T): T {
  const stream = (redis as unknown as { stream?: { cork?: () => void; uncork?: () => void } }).stream;
  stream?.cork?.();
  try {
    return send();
  } finally {
    stream?.uncork?.();
  }
}
