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
const E2E_ON_CLUSTER = [
  // run and wait
  'smoke.spec.ts',
  'client.spec.ts',
  'producer-worker.spec.ts',
  'run-inbox.spec.ts',
  'wait-inbox.spec.ts',
  // step replay and retries
  'steps-and-retries.spec.ts',
  'nested-steps.spec.ts',
  'step-retries.spec.ts',
  'step-parity.spec.ts',
  'testing-parity.spec.ts',
  // delays, schedules
  'scheduling.spec.ts',
  'schedules.spec.ts',
  'schedule-firing.spec.ts',
  // declared config against runtime changes and older code (caps, rate limits, schedules)
  'declared-config.spec.ts',
  'boot-declarations.spec.ts',
  // caps, groups, the fast path
  'caps.spec.ts',
  'fleet-concurrency.spec.ts',
  'groups.spec.ts',
  'group-ring.spec.ts',
  'fast-path.spec.ts',
  'invariants.spec.ts',
  // run control
  'cancel.spec.ts',
  'cancel-cascade.spec.ts',
  'pause.spec.ts',
  'rate-limits.spec.ts',
  'progress.spec.ts',
  'list-runs.spec.ts',
  'retry.spec.ts',
  'hand-back.spec.ts',
  'timeouts.spec.ts',
  'run-admin-input.spec.ts',
  'retention.spec.ts',
  'run-producer-retention.spec.ts',
  'stats.spec.ts',
  'publish.spec.ts',
  'batching.spec.ts',
  // the rest that holds on a cluster as it does on one server
  'bad-input.spec.ts',
  'contracts.spec.ts',
  'graceful-shutdown.spec.ts',
  'health-indicator.spec.ts',
  'lifecycle-logging.spec.ts',
  'lua-scripts.spec.ts',
  'migration.spec.ts',
  'regressions-worker.spec.ts',
  'telemetry.spec.ts',
  'workflow-events.spec.ts',
  // durable waits
  'durable-waits.spec.ts',
  'waits-children.spec.ts',
  'waits-child-redrive.spec.ts',
  'waits-events.spec.ts',
  'waits-signals.spec.ts',
  'waits-determinism.spec.ts',
  'waits-child-edges.spec.ts',
  'waits-groups.spec.ts',
  'waits-memo.spec.ts',
  'waits-continue.spec.ts',
  'waits-races.spec.ts',
  'waits-sleep.spec.ts',
  'waits-visibility.spec.ts',
  // The step timeline and the dashboard's API.
  'run-timeline.spec.ts',
  'dashboard-http.spec.ts',
];

module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/cluster/**/*.spec.ts', ...E2E_ON_CLUSTER.map((file) => `<rootDir>/test/e2e/${file}`)],
  testPathIgnorePatterns: ['/node_modules/'],
  globalSetup: '<rootDir>/test/support/cluster.global-setup.ts',
  globalTeardown: '<rootDir>/test/support/cluster.global-teardown.ts',
  testTimeout: 60000,
  maxWorkers: 1,
};
