/**
 * The compatibility app (`npm run test:compat`, see ../run.ts): a small Nest application that uses
 * nest-sluice the way an application does, installed from the packed tarball next to a given Nest
 * major. run.ts copies this file into an app directory whose package.json says `"type": "module"`
 * or `"type": "commonjs"` and compiles it there with `module: nodenext`, so the same source becomes
 * an ESM app (`import … from 'nest-sluice'`) or a CommonJS one (`require('nest-sluice')`), typed
 * against the installed Nest and the package's own declarations.
 *
 * It covers the module (`QueueModule.forRoot`), discovery of `@Workflow` providers with `@Step`
 * methods and constructor injection, the client (`QueueClient.run`: enqueue and wait), the worker
 * (a retry that replays a finished step instead of running it again), a schedule declared on
 * `@Workflow` firing, `RunEvents`, `QueueHealth` and `app.close()`; and that `import` and
 * `require` of `nest-sluice`, `nest-sluice/testing` and `nest-sluice/dashboard` give identical exports (one copy of the
 * code). It prints one `COMPAT-RESULT {...}` line and exits 0 only if every check passed; the
 * process must also exit on its own after `app.close()` (nothing left open).
 *
 * Not part of the repository's TypeScript project (tsconfig.json excludes test/compat/app): it
 * imports 'nest-sluice' as a package.
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { QueueClient, QueueHealth, QueueModule, RunContext, RunEvents, Step, Workflow } from 'nest-sluice';
import * as sluiceStatic from 'nest-sluice';

const REDIS_URL = process.env.REDIS_URL;
const LABEL = process.env.COMPAT_LABEL ?? 'compat';
const WATCHDOG_MS = 45_000;

const failures: string[] = [];
function check(ok: boolean, what: string, detail?: unknown): void {
  if (!ok) failures.push(detail === undefined ? what : `${what}: ${JSON.stringify(detail)}`);
}

/** How often each step body really executed (memoized steps must not execute again on retry). */
const executions = { greet: 0, charge: 0 };
const ticks: string[] = [];
let tickSeen: () => void = () => undefined;
const firstTick = new Promise<void>((resolve) => (tickSeen = resolve));

@Injectable()
class Greeter {
  greet(name: string): string {
    return `hello ${name}`;
  }
}

@Workflow('compat.order', { concurrency: 4, attempts: 3, backoff: { delayMs: 0 } })
class OrderWorkflow {
  constructor(private readonly greeter: Greeter) {}

  async run(input: { name: string; amount: number }, ctx: RunContext) {
    const greeting = await this.greet(input.name);
    const charged = await ctx.step('charge', () => {
      executions.charge++;
      return { amount: input.amount * 2 };
    });
    // The first attempt fails after both steps finished: the retry must replay them, not rerun them.
    if (ctx.attempt === 1) throw new Error('fail the first attempt on purpose');
    return { greeting, charged: charged.amount, attempt: ctx.attempt };
  }

  @Step()
  async greet(name: string): Promise<string> {
    executions.greet++;
    return this.greeter.greet(name);
  }
}

@Workflow('compat.tick', { schedules: [{ cron: '* * * * * *' }] })
class TickWorkflow {
  async run(_input: unknown, ctx: RunContext): Promise<string> {
    ticks.push(ctx.runId);
    tickSeen();
    return ctx.runId;
  }
}

@Module({
  imports: [
    QueueModule.forRoot({
      connection: { url: REDIS_URL },
      namespace: `compat-${process.pid}`,
      worker: { concurrency: 4, shutdownTimeoutMs: 5_000 },
    }),
  ],
  providers: [Greeter, OrderWorkflow, TickWorkflow],
})
class AppModule {}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: nothing after ${ms} ms`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function main(): Promise<void> {
  if (!REDIS_URL) throw new Error('REDIS_URL is not set');
  const watchdog = setTimeout(() => {
    console.error(`[${LABEL}] watchdog: still running after ${WATCHDOG_MS} ms`);
    process.exit(3);
  }, WATCHDOG_MS);
  watchdog.unref();

  // One copy of the package whichever way it is reached: `import` (the ESM entry, dist/index.mjs)
  // and `require` (dist/index.js) must give the very same classes, Nest's DI tokens.
  const requireHere = createRequire(join(process.cwd(), 'app.js'));
  const viaImport: Record<string, unknown> = await import('nest-sluice');
  const viaRequire = requireHere('nest-sluice') as Record<string, unknown>;
  check(sluiceStatic.QueueClient === viaRequire.QueueClient, "the static import gives the CommonJS build's QueueClient");
  const differing = Object.keys(viaRequire).filter((name) => viaImport[name] !== viaRequire[name]);
  check(
    Object.keys(viaRequire).length > 0 && differing.length === 0,
    'nest-sluice: names that import and require do not give identically',
    differing,
  );
  // The subpath entry, the same way.
  const testingViaImport: Record<string, unknown> = await import('nest-sluice/testing');
  const testingViaRequire = requireHere('nest-sluice/testing') as Record<string, unknown>;
  const testingDiffering = Object.keys(testingViaRequire).filter((name) => testingViaImport[name] !== testingViaRequire[name]);
  check(
    Object.keys(testingViaRequire).length > 0 && testingDiffering.length === 0,
    'nest-sluice/testing: names that import and require do not give identically',
    testingDiffering,
  );
  const dashboardViaImport: Record<string, unknown> = await import('nest-sluice/dashboard');
  const dashboardViaRequire = requireHere('nest-sluice/dashboard') as Record<string, unknown>;
  check(
    typeof dashboardViaRequire.SluiceDashboardModule === 'function' &&
      dashboardViaImport.SluiceDashboardModule === dashboardViaRequire.SluiceDashboardModule,
    'nest-sluice/dashboard: SluiceDashboardModule missing, or not the same through import and require',
  );

  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
  const client = app.get(QueueClient);
  const events = app.get(RunEvents);
  const completed: string[] = [];
  const failed: string[] = [];
  events.on('completed', (e) => completed.push(e.workflow));
  events.on('failed', (e) => failed.push(`${e.workflow}:${e.willRetry}`));

  const started = Date.now();
  const result = await client.run(OrderWorkflow, { name: 'nest', amount: 21 }, { timeoutMs: 20_000 });
  const runMs = Date.now() - started;
  check(result.greeting === 'hello nest' && result.charged === 42 && result.attempt === 2, 'run result', result);
  check(executions.greet === 1 && executions.charge === 1, 'each step executed once across the retry', executions);

  // A typed handle, then `get`: the stored record agrees.
  const handle = await client.enqueue(OrderWorkflow, { name: 'again', amount: 1 }, { id: `order-${process.pid}` });
  const second = await handle.result({ timeoutMs: 20_000 });
  const info = await client.get(handle.id);
  check(second.greeting === 'hello again' && info?.state === 'completed' && info.failures === 1, 'second run and its record', {
    second,
    state: info?.state,
    failures: info?.failures,
  });

  await within(firstTick, 10_000, 'the schedule declared on @Workflow("compat.tick") did not fire');
  const schedule = await client.getSchedule('compat.tick');
  check(
    !!schedule && schedule.fired >= 1 && schedule.source === 'code' && schedule.workflow === 'compat.tick',
    'schedule info',
    schedule && { fired: schedule.fired, source: schedule.source },
  );

  const health = await app.get(QueueHealth).check(2_000);
  check(health.healthy && health.worker.state === 'running', 'health', health);
  check(completed.includes('compat.order') && failed.includes('compat.order:true'), 'run events', { completed, failed });

  const closing = Date.now();
  await app.close();
  const closeMs = Date.now() - closing;
  clearTimeout(watchdog);

  const summary = { label: LABEL, node: process.version, result, runMs, ticks: ticks.length, fired: schedule?.fired, closeMs, failures };
  console.log(`COMPAT-RESULT ${JSON.stringify(summary)}`);
  if (failures.length > 0) process.exitCode = 1;
}

main().catch((error: unknown) => {
  console.error(`[${LABEL}] failed:`, error);
  process.exit(1); // the app may still hold connections open: do not wait for them
});
