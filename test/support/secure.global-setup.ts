import { randomBytes } from 'node:crypto';
import { freePort, startRedisServer } from './redis-server';
import { makeCertificates, SECURE_USERS, secureAdmin, type SecureServer, userRule } from './secure';

/**
 * Global setup of the secure suite (jest.secure.config.js): a certificate authority and a server
 * certificate made with openssl, one redis-server listening on a TLS port only (`port 0`; clients
 * need no certificate of their own), and the suite's ACL users made from the documented rules (see
 * ./secure). SLUICE_TEST_TLS tells test/support/app.ts where it is; REDIS_URL names it too (the
 * admin, TLS), so nothing starts a plain server beside it.
 */
export default async function secureGlobalSetup(): Promise<void> {
  if (process.env.SLUICE_TEST_TLS) return;
  const certificates = makeCertificates();
  const port = await freePort();
  const redis = await startRedisServer([
    '--port',
    '0',
    '--tls-port',
    String(port),
    '--tls-cert-file',
    certificates.cert,
    '--tls-key-file',
    certificates.key,
    '--tls-ca-cert-file',
    certificates.ca,
    '--tls-auth-clients',
    'no',
  ]);
  const server: SecureServer = { port, caFile: certificates.ca, password: randomBytes(12).toString('hex') };
  const admin = secureAdmin(server);
  try {
    for (const user of SECURE_USERS) await admin.call('ACL', 'SETUSER', ...userRule(user, server.password));
  } catch (error) {
    await redis.stop();
    throw error;
  } finally {
    admin.disconnect();
  }
  process.env.SLUICE_TEST_TLS = JSON.stringify(server);
  process.env.REDIS_URL = `rediss://127.0.0.1:${port}`;
  (globalThis as { __sluiceSecure__?: unknown }).__sluiceSecure__ = { redis, dir: certificates.dir };
}
