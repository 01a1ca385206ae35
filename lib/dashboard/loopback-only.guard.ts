import type { DashboardGuardFn } from './dashboard.options';

/** Addresses of this machine itself, as Node reports a peer's (IPv4, IPv6, IPv4-mapped IPv6). */
const LOOPBACK = /^(?:127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)$/;

/**
 * A dashboard guard that admits connections from this machine only (its peer address is a
 * loopback one): for a dashboard reached through an SSH tunnel or `kubectl port-forward`. Pair it
 * with `allowedHosts: []`: a page of another site that rebinds its name to 127.0.0.1 connects
 * from loopback too, and only the Host check refuses it. Behind a reverse proxy on the same machine
 * every request comes from loopback: use another guard there.
 */
export const loopbackOnlyGuard: DashboardGuardFn = (request: {
  socket?: { remoteAddress?: string };
  raw?: { socket?: { remoteAddress?: string } };
}) => {
  const address = request.socket?.remoteAddress ?? request.raw?.socket?.remoteAddress;
  return typeof address === 'string' && LOOPBACK.test(address);
};
