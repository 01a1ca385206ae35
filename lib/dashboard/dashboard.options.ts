import type { CanActivate, ExecutionContext, ModuleMetadata, Type } from '@nestjs/common';
import { QueueConfigError } from '../errors';
import { checkOptionKeys } from '../util/option-keys';
import { type AllowedHost, resolveAllowedHosts } from './dashboard.hosts';

/** A function that decides whether a request may see the dashboard (and act, when actions are on). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the HTTP adapter's request (Express or Fastify): a guard declares the type it expects; public API
export type DashboardGuardFn = (request: any, context: ExecutionContext) => boolean | Promise<boolean>;

/** Options of `SluiceDashboardModule.forRoot`. */
export interface SluiceDashboardOptions {
  /** Where the dashboard is mounted, e.g. `'/sluice'` (after the app's global prefix, if any). */
  path: string;
  /**
   * Who may open it: a guard class (resolved from the app's providers, else created with its
   * dependencies injected) or a function of the request. Applied to every page, asset and API
   * route. Without one, anyone who reaches the path can: mount it behind your own auth. (Without
   * one, it also answers only requests whose `Host` is a loopback name or in `allowedHosts`.)
   */
  guard?: Type<CanActivate> | DashboardGuardFn;
  /**
   * The hosts it answers to besides `localhost`, `127.0.0.1` and `[::1]` (any port), as the `Host`
   * header carries them: `'ops.example.com'` (any port), `'ops.example.com:8443'`, `'10.0.0.5'`.
   * Other hosts get a 403 before anything is read: a page of another site that rebinds its name
   * to this machine (DNS rebinding) cannot drive the dashboard. Checked when there is no guard,
   * and, when given, with a guard too.
   */
  allowedHosts?: string[];
  /** `true` (default): only reads. `false` enables the actions (retry, cancel, remove, pause, caps, schedules). */
  readOnly?: boolean;
  /** How often open pages refresh, in ms (default 2 000, 500–60 000). */
  pollMs?: number;
  /**
   * The throughput chart's step, in ms (default 5 000, 1 000–60 000): samples are taken by the
   * overview's reads, and between them by a timer for 15 minutes after the last one (a process
   * nobody watches samples nothing). `false`: no timer, only the page's reads.
   */
  sampleMs?: number | false;
  /**
   * Strip the server's absolute paths from the stack traces the page shows (a frame keeps its
   * function, its path from the app's directory or from `node_modules/`, and its line). Default:
   * on when `NODE_ENV` is `production`.
   */
  redactStacks?: boolean;
}

/**
 * Options of `SluiceDashboardModule.forRootAsync`: `path` is given as is (routes are registered
 * before any factory runs), the rest comes from `useFactory`, e.g. from `ConfigService`. `imports`
 * also serve a guard class whose dependencies come from those modules.
 */
export interface SluiceDashboardAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  /** Where the dashboard is mounted, e.g. `'/sluice'` (see `SluiceDashboardOptions.path`). */
  path: string;
  /** Returns (or resolves to) the other options of {@link SluiceDashboardOptions}; called with the providers `inject` lists. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- mirrors Nest's FactoryProvider: the factory's arguments are whatever `inject` lists; public API
  useFactory: (...args: any[]) => Omit<SluiceDashboardOptions, 'path'> | Promise<Omit<SluiceDashboardOptions, 'path'>>;
  /** The providers (tokens) whose instances `useFactory` receives, in order, e.g. `[ConfigService]`. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- mirrors Nest's FactoryProvider: the factory's arguments are whatever `inject` lists; public API
  inject?: any[];
}

export interface ResolvedDashboardOptions {
  path: string;
  guard?: Type<CanActivate> | DashboardGuardFn;
  /** The hosts checked before the guard; undefined: no check (a guard and no `allowedHosts`). */
  hosts?: readonly AllowedHost[];
  readOnly: boolean;
  pollMs: number;
  sampleMs: number | false;
  redactStacks: boolean;
}

export const DASHBOARD_OPTIONS = Symbol('SLUICE_DASHBOARD_OPTIONS');

const PATH = /^(\/[A-Za-z0-9._~-]+)+$/;
const KEYS = ['path', 'guard', 'allowedHosts', 'readOnly', 'pollMs', 'sampleMs', 'redactStacks'];

/**
 * Checks the options at import time: a typed error naming the option, before the app boots
 * (`InvalidOptionError` for an unknown key, `QueueConfigError` for a bad value).
 */
export function resolveDashboardOptions(options: SluiceDashboardOptions): ResolvedDashboardOptions {
  if (options === null || typeof options !== 'object')
    throw new QueueConfigError('SluiceDashboardModule.forRoot options must be an object { path, guard?, readOnly? }');
  checkOptionKeys(options, KEYS, 'SluiceDashboardModule options');
  const path = typeof options.path === 'string' && options.path.length > 1 ? options.path.replace(/\/+$/, '') : options.path;
  if (typeof path !== 'string' || !PATH.test(path)) {
    throw new QueueConfigError(
      `SluiceDashboardModule: path must look like '/sluice' (segments of letters, digits, . _ ~ -), got ${JSON.stringify(options.path)}`,
    );
  }
  if (options.guard !== undefined && typeof options.guard !== 'function')
    throw new QueueConfigError('SluiceDashboardModule: guard must be a guard class or a function (request, context) => boolean');
  if (options.readOnly !== undefined && typeof options.readOnly !== 'boolean')
    throw new QueueConfigError('SluiceDashboardModule: readOnly must be a boolean');
  const pollMs = options.pollMs ?? 2000;
  if (!Number.isInteger(pollMs) || pollMs < 500 || pollMs > 60_000)
    throw new QueueConfigError('SluiceDashboardModule: pollMs must be an integer from 500 to 60000');
  const sampleMs = options.sampleMs ?? 5000;
  if (sampleMs !== false && (!Number.isInteger(sampleMs) || sampleMs < 1000 || sampleMs > 60_000))
    throw new QueueConfigError('SluiceDashboardModule: sampleMs must be false or an integer from 1000 to 60000');
  if (options.redactStacks !== undefined && typeof options.redactStacks !== 'boolean')
    throw new QueueConfigError('SluiceDashboardModule: redactStacks must be a boolean');
  const allowedHosts = resolveAllowedHosts(options.allowedHosts);
  const hosts = allowedHosts ?? (options.guard === undefined ? [] : undefined);
  return {
    path,
    guard: options.guard,
    hosts,
    readOnly: options.readOnly ?? true,
    pollMs,
    sampleMs,
    redactStacks: options.redactStacks ?? process.env.NODE_ENV === 'production',
  };
}
