/**
 * The cluster suite (`npm run test:cluster`): the cluster tools' own tests (test/cluster/**,
 * each starting clusters of its own) and e2e specs re-run against a shared 3-master Redis Cluster
 * (SLUICE_TEST_CLUSTER, see test/support/cluster.global-setup.ts; test/support/app.ts connects
 * there when it is set). One file at a time, as in the fault suite: each cluster is several
 * OS processes.
 */
const base = require('./jest.config');

/**
 * test/e2e specs (file names) that also run against the cluster. Empty until the library accepts
 * `connection: { cluster: [...] }`: until then createApp fails in cluster mode.
 */
const E2E_ON_CLUSTER = [];

module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/cluster/**/*.spec.ts', ...E2E_ON_CLUSTER.map((file) => `<rootDir>/test/e2e/${file}`)],
  testPathIgnorePatterns: ['/node_modules/'],
  globalSetup: '<rootDir>/test/support/cluster.global-setup.ts',
  globalTeardown: '<rootDir>/test/support/cluster.global-teardown.ts',
  testTimeout: 60000,
  maxWorkers: 1,
};
