import { QueueConfigError } from '../errors';

/**
 * The Host check against DNS rebinding: a page of another site can rebind its own name to
 * 127.0.0.1 and then call a dashboard listening there as if it were same-origin, but the browser
 * still sends that site's name as `Host`. So a dashboard without a guard answers only the loopback
 * names (which no other site can make a browser use) and the hosts the app lists.
 */

/** A host the dashboard answers to: a name, and a port when the entry gave one (any port otherwise). */
export interface AllowedHost {
  name: string;
  port?: string;
}

/** Names a browser only ever sends for this machine itself, with any port. */
const LOOPBACK = ['localhost', '127.0.0.1', '[::1]'];

/** `name`, `name:port`, `[v6]`, `[v6]:port` (lower case; a name of letters, digits, `.`, `-`, `_`). */
const HOST = /^(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::(\d{1,5}))?$/;

function parse(value: string): AllowedHost | undefined {
  const match = HOST.exec(value.toLowerCase());
  return match ? { name: match[1], port: match[2] } : undefined;
}

/** Checks and normalises the `allowedHosts` option (a typed error naming the bad entry). */
export function resolveAllowedHosts(value: unknown): AllowedHost[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value))
    throw new QueueConfigError("SluiceDashboardModule: allowedHosts must be an array of host names, e.g. ['ops.example.com']");
  return value.map((entry, i) => {
    const host = typeof entry === 'string' ? parse(entry) : undefined;
    if (!host) {
      throw new QueueConfigError(
        `SluiceDashboardModule: allowedHosts[${i}] must be a host as the Host header carries it ('ops.example.com', 'ops.example.com:8443', '10.0.0.5', '[fd00::1]'), no scheme or path, got ${JSON.stringify(entry)}`,
      );
    }
    return host;
  });
}

/**
 * Why a request's `Host` is refused, or undefined when it is a loopback name or one of `allowed`.
 * A request without one is refused: every browser sends it.
 */
export function hostRefusal(headers: Record<string, string | string[] | undefined>, allowed: readonly AllowedHost[]): string | undefined {
  const raw = headers.host ?? headers[':authority'];
  const value = Array.isArray(raw) ? raw[0] : raw;
  const hint = 'open it as localhost, or list its host in SluiceDashboardModule.forRoot({ allowedHosts })';
  if (!value) return `Refused: the request has no Host header (this dashboard answers only known hosts: ${hint})`;
  const host = parse(value);
  if (
    host &&
    (LOOPBACK.includes(host.name) ||
      allowed.some((entry) => entry.name === host.name && (entry.port === undefined || entry.port === host.port)))
  )
    return undefined;
  return `Refused: this dashboard does not answer to the host ${JSON.stringify(value.slice(0, 100))} (a defence against DNS rebinding): ${hint}`;
}
