/**
 * `nest-sluice`: durable workflows for NestJS on Redis. {@link QueueModule} sets Sluice up;
 * {@link Workflow} and {@link Step} declare workflows and their memoized steps; {@link QueueClient}
 * starts, waits for, signals and inspects runs; {@link QueueAdmin} and {@link QueueSchedules}
 * operate them.
 * @module nest-sluice
 */
export { QueueModule } from './queue.module';
export type { QueueModuleAsyncOptions } from './queue.module';
export type { QueueModuleOptions, RedisConnectionOptions, WorkerOptions, RunDefaults } from './interfaces/queue.options';
export type { RedisClusterConnectionOptions, ClusterSeed } from './interfaces/cluster.options';
export type { RedisSentinelConnectionOptions, SentinelAddress } from './interfaces/sentinel.options';
export { Workflow } from './decorators/workflow.decorator';
export type { WorkflowDecorator } from './decorators/workflow.decorator';
export type { StandardSchemaV1, SchemaInput, SchemaOutput } from './workflow/standard-schema';
export { Step } from './decorators/step.decorator';
export type { StepOptions } from './decorators/step.decorator';
export type { StepCallOptions, StepContext, StepFn } from './workflow/step.options';
export type { BatchOptions } from './workflow/batch.options';
export { QueueClient } from './client/queue.client';
export { QueueAdmin } from './client/queue.admin';
export { QueueSchedules } from './client/queue.schedules';
export type { RunHandle } from './client/run.handle';
export type { WaitOptions } from './client/wait.options';
export type { WorkflowRef } from './client/workflow.ref';
export { RunEvents } from './worker/run.events';
export { QueueHealth } from './health/queue.health';
export type { QueueHealthReport } from './health/queue.health';
export type { WorkerState } from './worker/worker.orchestrator';
export type { RunOutcomeEvent, RunFailedEvent } from './interfaces/run.events';
export { MAX_PRIORITY } from './interfaces/enqueue.options';
export type { EnqueueOptions } from './interfaces/enqueue.options';
export type { DedupeMode, DedupeOptions, DedupeOutcome, DedupeResult, WorkflowDedupeOptions } from './interfaces/dedupe.options';
export type { RunInfo, RunDedupe, RunState, WaitState, WaitingFor } from './client/run-info';
export { MAX_TIMELINE_ATTEMPTS } from './client/run.timeline';
export type { RunTimeline, TimelineAttempt, TimelineCall, TimelineCallKind, TimelineCallStatus } from './client/run.timeline';
export type { SignalResult, SendEventOptions } from './client/run.signals';
export type { PublishOptions, PublishResult, PublishedRun, PublishedEvent, ListEventsOptions } from './client/event.types';
export type { WaitOutcome, SignalWaitOptions, EventWaitOptions, InvokeOptions, InvokeCall } from './workflow/wait.types';
export { MAX_INVOKE_ALL, MAX_INVOKE_BYTES, MAX_MAILBOX } from './workflow/wait.types';
export type { ListRunsOptions, RunPage, RetryAllOptions, RetryResult, FinishedState, ListableState } from './client/run.admin';
export { EVERY_GROUP } from './interfaces/limits';
export { MAX_LIMIT } from './interfaces/rate-limit';
export type { LimitTarget, Limits, RuntimeOverride, RuntimeOverrides } from './interfaces/limits';
export type { RateLimit } from './interfaces/rate-limit';
export type { CancelOptions, CancelResult, PauseTarget } from './client/run.control';
export type { QueueStats, WorkflowStats, GroupStats } from './interfaces/queue.stats';
export type {
  RunContext,
  InvokeTarget,
  WorkflowOptions,
  RetentionByCount,
  WorkflowClass,
  WorkflowInput,
  WorkflowOutput,
  BatchContext,
  BatchInfo,
} from './workflow/workflow.types';
export type { BackoffOptions } from './interfaces/backoff.options';
export type { Duration } from './util/duration';
export type { MigrateOptions, MigrationResult } from './migration/layout.migrator';
export { CURRENT_LAYOUT, ROLLING_LAYOUT } from './migration/layout.versions';
export * from './errors';
export type {
  ScheduleDefinition,
  DeclaredSchedule,
  ScheduleOptions,
  ScheduleRunOptions,
  CronTiming,
  IntervalTiming,
} from './interfaces/schedule.options';
export type { ScheduleInfo } from './schedule/schedule-info';
export type { SchedulePage, ListSchedulesOptions } from './schedule/schedule.store';
export type { Jsonified, Stored } from './workflow/payload.types';
export { jsonify, roundTrip } from './workflow/payload.types';
export { defineWorkflow, isWorkflowContract, WORKFLOW_CONTRACT } from './workflow/workflow.contract';
export type { WorkflowContract, WorkflowContractOptions } from './workflow/workflow.contract';
export type { ContractImplementation, SchemaImplementation } from './workflow/workflow.types';
export type { TelemetryOptions } from './interfaces/telemetry.options';
export { TELEMETRY_SCOPE, TELEMETRY_METRICS, TELEMETRY_ATTRIBUTES, STEP_REPLAYED_EVENT } from './telemetry/telemetry.names';
export type { AttemptOutcome } from './telemetry/telemetry.names';
export { OnWorkflowEvent } from './decorators/on-workflow-event.decorator';
export type { OnWorkflowEventOptions } from './decorators/on-workflow-event.decorator';
export type {
  RunActiveEvent,
  RunRetryingEvent,
  RunStalledEvent,
  RunEventMap,
  RunEventName,
  RunEventPayload,
} from './interfaces/run.events';
export { QueueHealthIndicator, QueueHealthCheckError } from './health/queue-health.indicator';
export type { QueueHealthIndicatorResult, QueueHealthDetails } from './health/queue-health.indicator';
export { MIN_REDIS_VERSION } from './redis/redis-server.check';
export { MAX_PROGRESS_BYTES } from './redis/progress.codec';
export type { LoggingOptions, AttemptFailedLevel } from './util/logging.options';
