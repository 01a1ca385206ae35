/**
 * The cluster suite (`npm run test:cluster`): the cluster tools' own tests (test/cluster/**,
 * each starting clusters of its own) and e2e specs re-run against a shared 3-master Redis Cluster
 * (SLUICE_TEST_CLUSTER, see test/support/cluster.global-setup.ts; test/support/app.ts connects
 * there when it is set). One file at a time, as in the fault suite: each cluster is several
 * OS processes.
 */
const base = require('./jest.config');

/**
 * test/e2e specs (file names) that also run against the cluster: their apps connect through
 * testConnection() and their raw checks go through the cluster-aware helpers of test/support
 * (rawRedis, scan, nodes, pubsub, client-list, queue-state watchLane, workflows monitorCommands,
 * scripts scriptsOn). Left off:
 * - regressions-client.spec.ts: its user-supplied ioredis instance (keyPrefix, duplication) is a
 *   single server's `new Redis(url)`; a user's ioredis Cluster is another code path.
 * - boot-checks.spec.ts, migration-fleet.spec.ts, stats-scale.spec.ts, namespace-cap-wakes.spec.ts: run on a private
 *   redis-server of their own (INFO, CONFIG, commandstats); nothing of theirs reaches the cluster.
 */
const E2E_ON_CLUSTER = require('./jest.e2e-core');

module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/cluster/**/*.spec.ts', ...E2E_ON_CLUSTER.map((file) => `<rootDir>/test/e2e/${file}`)],
  testPathIgnorePatterns: ['/node_modules/'],
  globalSetup: '<rootDir>/test/support/cluster.global-setup.ts',
  globalTeardown: '<rootDir>/test/support/cluster.global-teardown.ts',
  testTimeout: 60000,
  maxWorkers: 1,
};
