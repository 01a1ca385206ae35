import { QueueConfigError } from '../errors';
import { checkOptionKeys } from '../util/option-keys';

/**
 * OpenTelemetry options (module option `telemetry`). Sluice emits spans and metrics through
 * `@opentelemetry/api` when the app has that package installed (an optional peer dependency);
 * it never installs or starts an SDK itself: register yours (tracer and meter providers, context
 * manager, propagator) before the app boots, as OpenTelemetry's docs describe.
 */
export interface TelemetryOptions {
  /**
   * `false` turns Sluice's telemetry off even though `@opentelemetry/api` is installed: no spans,
   * no metrics, no trace context stored with runs, and the hot path is exactly the one of an app
   * without the API. Default `true` (on whenever the API can be loaded).
   */
  enabled?: boolean;
}

/** {@link TelemetryOptions} with defaults filled. */
export interface ResolvedTelemetryOptions {
  enabled: boolean;
}

/** Fills the default and checks the option, so a typo fails the bootstrap with a clear message. */
export function resolveTelemetryOptions(options: TelemetryOptions | undefined, where = 'telemetry'): ResolvedTelemetryOptions {
  if (options === undefined) return { enabled: true };
  if (options === null || typeof options !== 'object')
    throw new QueueConfigError(`telemetry must be an object { enabled? }, got ${String(options)}`);
  checkOptionKeys(options, ['enabled'], where);
  const enabled = options.enabled ?? true;
  if (typeof enabled !== 'boolean') throw new QueueConfigError(`telemetry.enabled must be true or false, got ${String(enabled)}`);
  return { enabled };
}
