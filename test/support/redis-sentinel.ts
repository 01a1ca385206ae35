import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { RedisProcess } from './redis-process';
import { freePort } from './redis-server';

/** The name the sentinels know the primary by (`sentinel monitor <name> …`). */
export const SENTINEL_MASTER = 'sluice-primary';

/**
 * A primary, its replicas and a quorum of sentinels, all `redis-server` processes on loopback
 * (sentinels are `redis-server <conf> --sentinel`, the binary Debian's redis-sentinel package links
 * to). Sentinels decide fast (`down-after-milliseconds` 1 s) so a failover takes a few seconds.
 * Servers are registered with the fault suite's teardown like any RedisProcess.
 */
export class SentinelTopology {
  private constructor(
    readonly nodes: RedisProcess[],
    private readonly sentinels: Array<{ port: number; child: ChildProcess; dir: string; log: () => string }>,
  ) {}

  static async start({ replicas = 2, sentinels = 3 } = {}): Promise<SentinelTopology> {
    // No delay before a full sync (default 5 s, waiting for more replicas): any node may be primary.
    const args = ['--repl-diskless-sync-delay', '0'];
    const primary = await RedisProcess.start({ args });
    const nodes = [primary];
    for (let index = 0; index < replicas; index++)
      nodes.push(await RedisProcess.start({ args: [...args, '--replicaof', '127.0.0.1', String(primary.port)] }));
    for (const replica of nodes.slice(1)) await untilInSync(replica.port);
    const started = [];
    for (let index = 0; index < sentinels; index++) started.push(await startSentinel(primary.port));
    const topology = new SentinelTopology(nodes, started);
    await topology.untilSentinelsSee(replicas, sentinels - 1);
    return topology;
  }

  /** The sentinels' addresses, as `connection.sentinels` takes them. */
  get addresses(): Array<{ host: string; port: number }> {
    return this.sentinels.map(({ port }) => ({ host: '127.0.0.1', port }));
  }

  /** A connection to a sentinel (for SENTINEL commands). */
  sentinel(index = 0): Redis {
    return new Redis({ host: '127.0.0.1', port: this.sentinels[index].port, lazyConnect: false, maxRetriesPerRequest: 1 });
  }

  /** The port of the node the first sentinel names as primary now. */
  async primaryPort(): Promise<number> {
    const sentinel = this.sentinel();
    try {
      const [, port] = (await sentinel.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_MASTER)) as [string, string];
      return Number(port);
    } finally {
      sentinel.disconnect();
    }
  }

  /** The data node listening on `port`. */
  node(port: number): RedisProcess {
    const node = this.nodes.find((candidate) => candidate.port === port);
    if (!node) throw new Error(`no data node on port ${port}`);
    return node;
  }

  /** Resolves once every sentinel names a primary other than `oldPort` (and it answers as a master); the time it did. */
  async untilPromoted(oldPort: number, timeoutMs = 30_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const ports = await Promise.all(this.sentinels.map((_, index) => this.askPrimary(index)));
      if (ports.every((port) => port !== undefined && port !== oldPort && port === ports[0])) {
        const node = new Redis({ port: ports[0], lazyConnect: false, maxRetriesPerRequest: 1 });
        const role = await node.role().finally(() => node.disconnect());
        if (role[0] === 'master') return Date.now();
      }
      if (Date.now() > deadline) throw new Error(`no promotion within ${timeoutMs} ms (sentinels name ${ports.join(', ')})`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Resolves once the node on `port` answers as a replica (the sentinels reconfigured the old primary); the time it did. */
  async untilDemoted(port: number, timeoutMs = 30_000): Promise<number> {
    const node = new Redis({ port, maxRetriesPerRequest: 1 });
    try {
      const deadline = Date.now() + timeoutMs;
      while ((await node.role())[0] !== 'slave') {
        if (Date.now() > deadline) throw new Error(`node ${port} still a primary after ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return Date.now();
    } finally {
      node.disconnect();
    }
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.sentinels.map(async ({ child, dir }) => {
        if (child.exitCode === null && child.signalCode === null) {
          const exited = new Promise((resolve) => child.once('exit', resolve));
          child.kill('SIGKILL');
          await exited;
        }
        rmSync(dir, { recursive: true, force: true });
      }),
    );
    await Promise.all(this.nodes.map((node) => node.stop()));
  }

  private async askPrimary(index: number): Promise<number | undefined> {
    const sentinel = this.sentinel(index);
    try {
      const reply = (await sentinel.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_MASTER)) as [string, string] | null;
      return reply ? Number(reply[1]) : undefined;
    } catch {
      return undefined;
    } finally {
      sentinel.disconnect();
    }
  }

  /** Waits until every sentinel knows the replicas and the other sentinels (a failover needs both). */
  private async untilSentinelsSee(replicas: number, peers: number, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let index = 0; index < this.sentinels.length; index++) {
      const sentinel = this.sentinel(index);
      try {
        for (;;) {
          const master = (await sentinel.call('SENTINEL', 'MASTER', SENTINEL_MASTER)) as string[];
          const field = (name: string) => Number(master[master.indexOf(name) + 1]);
          if (field('num-slaves') >= replicas && field('num-other-sentinels') >= peers) break;
          if (Date.now() > deadline) throw new Error(`sentinel ${index} does not see the topology:\n${this.sentinels[index].log()}`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      } finally {
        sentinel.disconnect();
      }
    }
  }
}

/** Waits for a replica's initial sync: before it, a failover would promote an empty node. */
async function untilInSync(port: number, timeoutMs = 20_000): Promise<void> {
  const replica = new Redis({ port, maxRetriesPerRequest: 1 });
  try {
    const deadline = Date.now() + timeoutMs;
    while (!/^master_link_status:up\r?$/m.test(await replica.info('replication'))) {
      if (Date.now() > deadline) throw new Error(`replica ${port} not in sync after ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    replica.disconnect();
  }
}

async function startSentinel(primaryPort: number) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'sluice-sentinel-'));
  const conf = join(dir, 'sentinel.conf');
  // Sentinel rewrites its config file: it must be its own, writable.
  writeFileSync(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor ${SENTINEL_MASTER} 127.0.0.1 ${primaryPort} 2`,
      `sentinel down-after-milliseconds ${SENTINEL_MASTER} 1000`,
      `sentinel failover-timeout ${SENTINEL_MASTER} 10000`,
      `sentinel parallel-syncs ${SENTINEL_MASTER} 2`,
    ].join('\n') + '\n',
  );
  const child = spawn('redis-server', [conf, '--sentinel'], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.unref();
  let output = '';
  const collect = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000));
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  (child.stdout as unknown as { unref(): void }).unref();
  (child.stderr as unknown as { unref(): void }).unref();
  const runDir = process.env.SLUICE_CHAOS_RUN_DIR;
  if (runDir && child.pid) {
    // The fault suite's teardown kills what a failed test leaves (see redis-process.ts).
    const entry = join(runDir, String(child.pid));
    writeFileSync(entry, JSON.stringify({ port, dir, ownsDir: true }));
    child.once('exit', () => rmSync(entry, { force: true }));
  }
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sentinel on ${port} not up after 10 s:\n${output}`)), 10_000);
    const check = () => {
      if (!/\+monitor master/.test(output)) return;
      clearTimeout(timer);
      child.stdout.off('data', check);
      resolve();
    };
    child.stdout.on('data', check);
    child.once('exit', (code) => reject(new Error(`sentinel exited with ${code}:\n${output}`)));
  });
  return { port, child, dir, log: () => output };
}
