/**
 * The core test/e2e specs that re-run against other Redis setups (the cluster suite, the secure
 * suite): their apps connect through testConnection() and their raw checks go through the
 * setup-aware helpers of test/support (rawRedis, scan, nodes, pubsub, client-list, queue-state
 * watchLane, workflows monitorCommands, scripts scriptsOn). Each suite's config says which it leaves off, and why.
 */
module.exports = [
  // run and wait
  'smoke.spec.ts',
  'client.spec.ts',
  'producer-worker.spec.ts',
  'run-inbox.spec.ts',
  'wait-inbox.spec.ts',
  // step replay and retries
  'steps-and-retries.spec.ts',
  'batches.spec.ts',
  'nested-steps.spec.ts',
  'step-retries.spec.ts',
  'step-parity.spec.ts',
  'testing-parity.spec.ts',
  // delays, schedules
  'scheduling.spec.ts',
  'schedules.spec.ts',
  'schedule-firing.spec.ts',
  'interval-schedules.spec.ts',
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
  'dedupe.spec.ts',
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
  // event triggers (publish, @Workflow({ on }))
  'event-triggers.spec.ts',
  // The step timeline and the dashboard's API.
  'run-timeline.spec.ts',
  'dashboard-http.spec.ts',
];
