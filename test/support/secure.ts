import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis, { RedisOptions } from 'ioredis';
import { aclSetUser, type AclRole, ACL_ROLES } from '../../lib/redis/acl.rules';

/**
 * The secure suite's server (jest.secure.config.js): one redis-server that takes TLS connections
 * only, with certificates made by openssl for the run, and ACL users made from the documented
 * rules (lib/redis/acl.rules.ts, printed in docs/connections.md). Its global setup puts where it is
 * in SLUICE_TEST_TLS; test/support/app.ts then connects the tests' apps over TLS as the `app` user
 * and their raw checks as the admin (the default user, TLS too).
 */
export interface SecureServer {
  /** The TLS port on 127.0.0.1 (the server listens on no plain port). */
  port: number;
  /** The certificate authority that signed the server's certificate (PEM file). */
  caFile: string;
  /** Each test user's password (every user of the suite has the same one). */
  password: string;
}

/** The users of the suite: one per documented role, and `app`, the union (apps that enqueue and work in one process). */
export type SecureUser = AclRole | 'app';
export const SECURE_USERS: readonly SecureUser[] = [...ACL_ROLES, 'app'];

/** The secure suite's server, or undefined outside it. */
export function testTls(): SecureServer | undefined {
  const raw = process.env.SLUICE_TEST_TLS;
  return raw ? (JSON.parse(raw) as SecureServer) : undefined;
}

export function caOf(server: SecureServer): Buffer {
  return readFileSync(server.caFile);
}

/** The `connection` option of an app that connects as one of the suite's users (see {@link userConnection}). */
export function secureConnection(server: SecureServer, user: SecureUser = 'app') {
  return userConnection(server, userName(user));
}

/** The `connection` option of an app that connects as the ACL user `name` (a `rediss://` URL: TLS, verified against the run's CA). */
export function userConnection(server: SecureServer, name: string, password = server.password) {
  return { url: `rediss://${name}:${password}@127.0.0.1:${server.port}`, tls: { ca: caOf(server) } };
}

/** An admin connection (the default user, every permission) over TLS: for raw checks, cleanup and ACL changes. */
export function secureAdmin(server: SecureServer, options: RedisOptions = {}): Redis {
  return new Redis({ host: '127.0.0.1', port: server.port, tls: { ca: caOf(server) }, ...options });
}

export function userName(user: SecureUser): string {
  return `sluice-${user}`;
}

/**
 * The ACL SETUSER arguments of `user`: its documented rule for every namespace of the default
 * prefix (`{sluice:*}:*`: each test uses a namespace of its own); `app` gets the union of the
 * three rules, each permission once.
 */
export function userRule(user: SecureUser, password: string): string[] {
  if (user !== 'app') return aclSetUser(user, userName(user), password, { namespace: '*' }).slice(2);
  const rules = ACL_ROLES.map((role) => aclSetUser(role, userName('app'), password, { namespace: '*' }).slice(2));
  return [...new Set(rules.flat())];
}

/**
 * Makes a certificate authority and a certificate for 127.0.0.1 signed by it (openssl, EC P-256:
 * quick to make), in a new temporary directory. Returns the directory and the files.
 */
export function makeCertificates(): { dir: string; ca: string; cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-tls-'));
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=Sluice test CA');
  openssl('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
  writeFileSync(file('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  openssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    'server.ext',
    '-out',
    'server.crt',
  );
  return { dir, ca: file('ca.crt'), cert: file('server.crt'), key: file('server.key') };
}

/**
 * What Redis refused these users (its ACL LOG, last 128 refusals): `<user>: <reason> <object>
 * (<context>)`, e.g. `sluice-app: command blpop (toplevel)`, or `key … (lua)` for a command a
 * script sent. Refusals in the background (a worker's loop, a heartbeat) fail no call a test
 * awaits: this is how the suite sees them.
 */
export async function aclDenials(admin: Redis, users: readonly string[]): Promise<string[]> {
  const entries = (await admin.call('ACL', 'LOG', '128')) as string[][];
  return entries
    .map((flat) => Object.fromEntries(flat.flatMap((value, i) => (i % 2 === 0 ? [[value, flat[i + 1]]] : []))) as Record<string, string>)
    .filter((entry) => users.includes(entry.username))
    .map((entry) => `${entry.username}: ${entry.reason} ${entry.object} (${entry.context})`)
    .filter((denial) => !EXPECTED.some((expected) => denial.endsWith(expected)));
}

/**
 * The refusal the rules leave on purpose: `CONFIG GET save`, which each process's first ready
 * check sends for the persistence check (refused, a note says it was not checked); granting it
 * would let the user read every setting, passwords included (docs/connections.md).
 */
const EXPECTED = [': command config|get (toplevel)'];
