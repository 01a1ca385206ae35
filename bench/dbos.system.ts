/**
 * DBOS (`@dbos-inc/dbos-sdk`), the durable workflow engine on PostgreSQL: the peer for durable
 * steps, measured on `drain-c50-3steps` only (it is not a Redis queue, so the Redis scenarios and
 * columns do not apply). Set up as its docs recommend for a worker: a database-backed queue
 * (`DBOS.registerQueue`, `workerConcurrency` 50), steps through `DBOS.runStep`. Its queue is polled;
 * the poll is set to 10 ms (`minPollingIntervalMs`; DBOS's default is 1 s), as in the outside
 * harness that set this target.
 *
 * The server: `BENCH_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`, the
 * machine's own PostgreSQL). Every run drops and recreates the database {@link DATABASE} on it and
 * touches nothing else; with no server there, main.ts leaves DBOS out and says so.
 */
import { DBOS } from '@dbos-inc/dbos-sdk';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import { BenchSystem, inParallel, PreparedRun, ScenarioName } from './bench.types';

const SERVER_URL = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
/** The bench's own database: dropped and recreated by every run. */
const DATABASE = 'sluice_bench_dbos';
const QUEUE = 'bench_steps';
/**
 * Runs per DBOS run: its rate is about a hundredth of the Redis systems', so the scenario's 20 000
 * would take minutes per repeat. Rates, not totals, are compared.
 */
const DBOS_JOBS = 2_000;
const POLL_MS = 10;

function databaseUrl(): string {
  const url = new URL(SERVER_URL);
  url.pathname = `/${DATABASE}`;
  return url.toString();
}

async function onServer<T>(url: string, use: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

/** Successful workflows of the bench's queue (DBOS's system table). */
async function succeeded(client: Client): Promise<number> {
  const { rows } = await client.query(`SELECT count(*) AS n FROM dbos.workflow_status WHERE queue_name = $1 AND status = 'SUCCESS'`, [
    QUEUE,
  ]);
  return Number(rows[0].n);
}

async function threeSteps(input: number): Promise<string> {
  const a = await DBOS.runStep(async () => input + 1, { name: 'one' });
  const b = await DBOS.runStep(async () => a + 1, { name: 'two' });
  return DBOS.runStep(async () => `ok-${b}`, { name: 'three' });
}

export class DbosSystem implements BenchSystem {
  readonly name = 'dbos';

  noEquivalent(scenario: ScenarioName): string | undefined {
    return scenario === 'drain-c50-3steps'
      ? undefined
      : 'dbos: measured on durable 3-step runs only (a workflow engine on PostgreSQL, not a Redis queue)';
  }

  jobsFor(_scenario: ScenarioName, jobs: number): number {
    return Math.min(jobs, DBOS_JOBS);
  }

  /** Why DBOS cannot be measured here (no PostgreSQL), or undefined. */
  async unavailable(): Promise<string | undefined> {
    try {
      await onServer(SERVER_URL, (client) => client.query('SELECT 1'));
      return undefined;
    } catch (error) {
      return `dbos: left out, no PostgreSQL at ${new URL(SERVER_URL).host} (${(error as Error).message}; set BENCH_POSTGRES_URL)`;
    }
  }

  async prepare(_scenario: ScenarioName, jobs: number): Promise<PreparedRun> {
    await onServer(SERVER_URL, async (client) => {
      await client.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);
      await client.query(`CREATE DATABASE ${DATABASE}`);
    });
    DBOS.setConfig({
      name: 'sluice-bench',
      applicationVersion: '0.1.0',
      systemDatabaseUrl: databaseUrl(),
      logLevel: 'error',
      runAdminServer: false,
    });
    const workflow = DBOS.registerWorkflow(threeSteps, { name: 'threeSteps' });
    await DBOS.launch();
    // Pre-fill (untimed): enqueued on a queue no process listens to yet, so they stay ENQUEUED.
    await inParallel(jobs, 50, (i) => DBOS.startWorkflow(workflow, { queueName: QUEUE })(i));
    // One connection of its own for the finish line's count (not one per look).
    const counter = new Client({ connectionString: databaseUrl() });
    await counter.connect();
    return {
      note: `dbos: ${jobs} runs per repeat; queue workerConcurrency 50, polled every ${POLL_MS} ms; PostgreSQL ${new URL(SERVER_URL).host}`,
      // The clock starts as the queue is registered, i.e. as this process starts dequeuing.
      timed: async () => {
        await DBOS.registerQueue(QUEUE, { workerConcurrency: 50, minPollingIntervalMs: POLL_MS });
        while ((await succeeded(counter)) < jobs) await sleep(POLL_MS);
        return {};
      },
      committed: () => succeeded(counter),
      cleanup: async () => {
        await counter.end();
        await DBOS.shutdown({ deregister: true });
      },
    };
  }
}
