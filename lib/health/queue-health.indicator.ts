import { Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { SluiceError } from '../errors';
import { checkOptionKeys } from '../util/option-keys';
import type { WorkerState } from '../worker/worker.orchestrator';
import { QueueHealth, type QueueHealthReport } from './queue.health';

/** What the indicator reports under its key, beside `status` (JSON-ready: dates as ISO strings). */
export interface QueueHealthDetails {
  /** `QueueHealthReport.redis`. */
  redis: {
    /** Redis answered the `PING` in time. */
    up: boolean;
    /** Why it did not; absent when `up`. */
    error?: string;
  };
  /** `QueueHealthReport.worker`, its date as an ISO string. */
  worker: {
    /** Where the worker is in its lifecycle. */
    state: WorkerState;
    /** When the reserve loop last came round, as an ISO string. */
    lastWakeAt?: string;
    /** Why the worker is unhealthy; absent otherwise. */
    error?: string;
  };
}

/** The `@nestjs/terminus` indicator result: `{ [key]: { status: 'up' | 'down', redis, worker } }`. */
export type QueueHealthIndicatorResult<Key extends string = string> = Record<Key, QueueHealthDetails & { status: 'up' | 'down' }>;

/**
 * Thrown by {@link QueueHealthIndicator.isHealthy} when Sluice is unhealthy and `@nestjs/terminus`
 * is not installed (with a terminus older than 11 its own `HealthCheckError` is thrown
 * instead). Shaped like terminus's error: `causes` is the indicator result, and
 * `isHealthCheckError` is set.
 */
export class QueueHealthCheckError extends SluiceError {
  /** Always `true`: how terminus recognises a health check error. */
  readonly isHealthCheckError = true;

  constructor(
    message: string,
    /** The indicator result, with `status: 'down'`. */
    readonly causes: QueueHealthIndicatorResult,
  ) {
    super(message);
  }
}

/** The parts of `@nestjs/terminus` the indicator uses; either may be missing (older or newer versions). */
interface TerminusExports {
  HealthIndicatorService?: new () => HealthIndicatorServiceLike;
  HealthCheckError?: new (message: string, causes: unknown) => Error;
}

interface HealthIndicatorServiceLike {
  check(key: string): { up(data: object): QueueHealthIndicatorResult; down(data: object): QueueHealthIndicatorResult };
}

/**
 * A health indicator for `@nestjs/terminus`, without depending on it: terminus is an optional
 * peer, looked up (with `require`, once) on the first check. Reports what {@link QueueHealth}
 * does — Redis answering a `PING`, and a worker that runs, comes round and can be woken.
 *
 * ```ts
 * @Get('health') @HealthCheck()
 * check() {
 *   return this.health.check([() => this.queue.isHealthy('sluice')]);
 * }
 * ```
 *
 * How it reports "down" follows the installed terminus: with one that has
 * `HealthIndicatorService` (exported from terminus 11) it returns
 * `HealthIndicatorService.check(key).down(details)` (the style those versions expect of custom
 * indicators; `HealthCheckService` answers 503); with an older terminus it throws terminus's
 * `HealthCheckError`; without terminus it throws {@link QueueHealthCheckError}. Either way the
 * result (or the error's `causes`) is `{ [key]: { status, redis, worker } }`.
 */
@Injectable()
export class QueueHealthIndicator {
  private terminus?: TerminusExports | null;
  private service?: HealthIndicatorServiceLike;

  constructor(
    private readonly health: QueueHealth,
    private readonly moduleRef: ModuleRef,
  ) {}

  /**
   * Checks now; settles within `timeoutMs` (default `redisTimeoutMs`).
   *
   * @param key the key of the result in terminus's report. Default `'sluice'`.
   */
  async isHealthy<Key extends string = 'sluice'>(
    key: Key = 'sluice' as Key,
    options: { timeoutMs?: number } = {},
  ): Promise<QueueHealthIndicatorResult<Key>> {
    checkOptionKeys(options, ['timeoutMs'], 'isHealthy options');
    const report = await this.health.check(options.timeoutMs);
    const details = toDetails(report);
    const service = this.indicatorService();
    if (service) {
      const session = service.check(key);
      return report.healthy ? session.up(details) : session.down(details);
    }
    const result = { [key]: { status: report.healthy ? 'up' : 'down', ...details } } as QueueHealthIndicatorResult<Key>;
    if (report.healthy) return result;
    const message = `Sluice is unhealthy: ${describe(report)}`;
    const HealthCheckError = this.loadTerminus()?.HealthCheckError;
    throw HealthCheckError ? new HealthCheckError(message, result) : new QueueHealthCheckError(message, result);
  }

  /** Terminus's HealthIndicatorService (exported from terminus 11): the app's instance if TerminusModule is imported, else a new one (it has no state). */
  private indicatorService(): HealthIndicatorServiceLike | undefined {
    if (this.service) return this.service;
    const Service = this.loadTerminus()?.HealthIndicatorService;
    if (!Service) return undefined;
    try {
      this.service = this.moduleRef.get(Service, { strict: false });
    } catch {
      this.service = new Service();
    }
    return this.service;
  }

  /** `require`, not `import`: a static import would make terminus a hard dependency. */
  private loadTerminus(): TerminusExports | null {
    if (this.terminus === undefined) {
      try {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        this.terminus = require('@nestjs/terminus') as TerminusExports;
      } catch {
        this.terminus = null;
      }
    }
    return this.terminus;
  }
}

function toDetails(report: QueueHealthReport): QueueHealthDetails {
  const { state, lastWakeAt, error } = report.worker;
  return {
    redis: report.redis,
    worker: { state, ...(lastWakeAt && { lastWakeAt: lastWakeAt.toISOString() }), ...(error && { error }) },
  };
}

function describe(report: QueueHealthReport): string {
  const parts = [
    ...(report.redis.up ? [] : [`Redis did not answer (${report.redis.error ?? 'no reply'})`]),
    ...(report.worker.error
      ? [`worker ${report.worker.state}: ${report.worker.error}`]
      : report.worker.state === 'disabled' || report.worker.state === 'running'
        ? []
        : [`worker ${report.worker.state}`]),
  ];
  return parts.join('; ') || 'unhealthy';
}
