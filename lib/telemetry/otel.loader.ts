// Types only: erased from the JavaScript, so this file never loads the package by itself.
import type * as OtelApiModule from '@opentelemetry/api';

/** The `@opentelemetry/api` module, when the app has it. */
export type OtelApi = typeof OtelApiModule;

/** What decides whether telemetry is on: the resolved module option. */
export interface TelemetrySwitch {
  telemetry?: { enabled: boolean };
}

/** How a module is loaded; tests pass one that throws, as a missing package does. */
export type ModuleLoader = (id: string) => unknown;

/**
 * Loads `@opentelemetry/api` if it can be: it is an optional peer dependency, so an app without
 * it must work, and pay nothing. Any failure to load it (not installed, or a broken install)
 * means "absent", and so does a module that lacks the tracing, metrics or propagation API (a
 * version older than 1.3, which the peer range excludes): Sluice never half-instruments.
 */
export function loadOpenTelemetry(load: ModuleLoader = require): OtelApi | undefined {
  try {
    const api = load('@opentelemetry/api') as Partial<OtelApi> | undefined;
    const usable =
      typeof api?.trace?.getTracer === 'function' &&
      typeof api.metrics?.getMeter === 'function' &&
      typeof api.propagation?.inject === 'function' &&
      typeof api.context?.with === 'function';
    return usable ? (api as OtelApi) : undefined;
  } catch {
    return undefined;
  }
}

/** `undefined`: not tried yet; `null`: tried, absent. One require per process, whatever asks. */
let loaded: OtelApi | null | undefined;

/** The API if telemetry is on for these options: not switched off, and the package loads. */
export function telemetryApi(options: TelemetrySwitch): OtelApi | undefined {
  if (options.telemetry?.enabled === false) return undefined;
  if (loaded === undefined) loaded = loadOpenTelemetry() ?? null;
  return loaded ?? undefined;
}

/** This package's version, for the tracer's and meter's instrumentation scope (undefined if unreadable). */
export function sluiceVersion(): string | undefined {
  try {
    // From dist/telemetry (and lib/telemetry under ts-jest), the package root is two levels up.
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- a JSON file outside rootDir, read at run time: an import would pull package.json into the build
    return (require('../../package.json') as { version?: string }).version;
  } catch {
    return undefined;
  }
}
