import type { Redis } from 'ioredis';

/** The ioredis instance given as `connection`, if one was (rather than connection fields). */
export function userRedisInstance(connection: unknown): Redis | undefined {
  const candidate = connection as Partial<Redis> | null;
  return candidate && typeof candidate.duplicate === 'function' && typeof candidate.defineCommand === 'function'
    ? (candidate as Redis)
    : undefined;
}
