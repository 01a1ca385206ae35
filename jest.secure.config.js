/**
 * The secure suite (`npm run test:secure`): its own tests (test/secure/**: the ACL rules per role,
 * a permission taken away, TLS refusals) and core e2e specs re-run against one redis-server that
 * takes TLS connections only, their apps connecting as an ACL user whose rule is the union of the
 * documented ones (docs/deployment.md, "ACL users") and nothing more; see
 * test/support/secure.global-setup.ts and test/support/app.ts (testConnection, rawRedis: the
 * tests' own raw checks go through the admin user, over TLS too).
 */
const base = require('./jest.config');

/**
 * test/e2e specs (file names) that also run in the secure suite: the cluster suite's list (each of
 * them connects its apps through testConnection() and checks raw state through rawRedis(), see
 * jest.cluster.config.js), so each app's whole Redis traffic goes through the restricted user: a
 * command missing from the rules fails them with NOPERM, or the global teardown, which fails the
 * run on any refusal Redis logged for the user (ACL LOG), in the background too. Left off:
 * - stats.spec.ts: sends CLIENT INFO through the app's own connection (a test's look at it, not
 *   something Sluice sends), which the rules rightly refuse.
 * - lifecycle-logging.spec.ts: a namespace under another prefix (`life`), outside the test user's
 *   keys (`{sluice:*}:*`).
 * - boot-declarations.spec.ts: counts the calls of a worker's boot, and a boot as a named ACL user
 *   sends one more, the ACL check (docs/deployment.md, "Checked at boot"); it runs in the main suite.
 * - the specs that are off the cluster list too (see jest.cluster.config.js): they start private
 *   servers of their own or connect with connections of their own.
 */
const LEFT_OFF = ['stats.spec.ts', 'lifecycle-logging.spec.ts', 'boot-declarations.spec.ts'];
const E2E_ON_SECURE = require('./jest.e2e-core').filter((file) => !LEFT_OFF.includes(file));

module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/secure/**/*.spec.ts', ...E2E_ON_SECURE.map((file) => `<rootDir>/test/e2e/${file}`)],
  testPathIgnorePatterns: ['/node_modules/'],
  globalSetup: '<rootDir>/test/support/secure.global-setup.ts',
  globalTeardown: '<rootDir>/test/support/secure.global-teardown.ts',
  testTimeout: 30000,
  maxWorkers: 2,
};
