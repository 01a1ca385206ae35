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
 * test/e2e specs (file names) that also run in the secure suite: each app's whole Redis traffic
 * goes through the restricted user, so a command missing from the rules fails them with NOPERM.
 * Left off: specs that start private servers of their own (boot-checks, migration-fleet,
 * stats-scale, namespace-cap-wakes, lua-library, script-flags: no TLS or ACL there to test), or that
 * connect an app with a connection of their own rather than testConnection() (regressions-client,
 * readme-quickstart, payload-fleet).
 */
const E2E_ON_SECURE = [
  // run and wait
  'smoke.spec.ts',
  'client.spec.ts',
  'producer-worker.spec.ts',
  'run-inbox.spec.ts',
  // steps, retries, durable waits
  'steps-and-retries.spec.ts',
  'durable-waits.spec.ts',
  'waits-signals.spec.ts',
  'waits-continue.spec.ts',
  // schedules, caps, run control
  'schedules.spec.ts',
  'groups.spec.ts',
  'cancel.spec.ts',
  'pause.spec.ts',
  'rate-limits.spec.ts',
  'progress.spec.ts',
  'retry.spec.ts',
  'list-runs.spec.ts',
  // the dashboard's API, health, migrations
  'dashboard-http.spec.ts',
  'health-indicator.spec.ts',
  'migration.spec.ts',
];

module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/secure/**/*.spec.ts', ...E2E_ON_SECURE.map((file) => `<rootDir>/test/e2e/${file}`)],
  testPathIgnorePatterns: ['/node_modules/'],
  globalSetup: '<rootDir>/test/support/secure.global-setup.ts',
  globalTeardown: '<rootDir>/test/support/secure.global-teardown.ts',
  testTimeout: 30000,
  maxWorkers: 2,
};
