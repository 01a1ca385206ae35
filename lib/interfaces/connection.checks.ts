import { QueueConfigError } from '../errors';

/** A `{ host, port }` a connection option names (a cluster seed, a sentinel, a natMap target). */
export interface HostAndPort {
  host: string;
  port: number;
}

/** Checks one `{ host, port }`; `field` names it in the error. */
export function checkAddress(address: unknown, field: string): HostAndPort {
  const { host, port } = (address ?? {}) as Partial<HostAndPort>;
  if (typeof host !== 'string' || host.length === 0) throw new QueueConfigError(`${field}.host must be a non-empty string`);
  if (typeof port !== 'number' || !Number.isInteger(port) || port <= 0 || port > 65_535)
    throw new QueueConfigError(`${field}.port must be a port number, got ${String(port)}`);
  return { host, port };
}

/** Checks that the credentials given (usernames, passwords) are strings. */
export function checkCredentials(fields: Record<string, unknown>): void {
  for (const [field, value] of Object.entries(fields)) {
    if (value !== undefined && typeof value !== 'string') throw new QueueConfigError(`options.connection.${field} must be a string`);
  }
}
