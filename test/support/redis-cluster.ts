import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import calculateSlot from 'cluster-key-slot';
import Redis, { Cluster, ClusterOptions, RedisOptions } from 'ioredis';
import { RedisProcess } from './redis-process';
import { freePort } from './redis-server';

/**
 * A throwaway Redis Cluster of redis-server processes on free loopback ports, built by hand
 * (no redis-cli --cluster): slots assigned with ADDSLOTSRANGE, nodes joined with MEET, replicas
 * attached with REPLICATE. Plus the faults a cluster adds: a master killed and failed over, a slot
 * moved live (MIGRATING / IMPORTING, keys moved in batches a test can interleave traffic with).
 *
 * Each node is a {@link RedisProcess}, so in the fault and cluster suites a node a failed test
 * leaves running is killed by the global teardown (SLUICE_CHAOS_RUN_DIR registry).
 *
 * Nothing here imports the library: the cluster suite's global setup uses it.
 */

export const SLOTS = 16384;

export interface ClusterSeed {
  host: '127.0.0.1';
  port: number;
}

export type ClusterRole = 'master' | 'replica';

/** One node. `role` and `masterId` are as of the last operation that waited for the cluster to settle (start, migrateSlot, waitForFailover, restart). */
export interface ClusterNode {
  readonly port: number;
  /** The cluster bus port (--cluster-port): set explicitly, since port + 10000 may exceed 65535. */
  readonly busPort: number;
  /** The node id (CLUSTER MYID); kept across restarts (nodes.conf survives). */
  readonly id: string;
  /** The pid of the current incarnation. */
  readonly pid: number;
  readonly role: ClusterRole;
  /** The id of its master when a replica. */
  readonly masterId: string | undefined;
  /** False between kill() and restart(). */
  readonly alive: boolean;
  readonly process: RedisProcess;
}

/** One line of CLUSTER SLOTS, by port: `start`–`end` (inclusive) served by `master`, replicated to `replicas` (sorted; failed replicas are not listed). */
export interface SlotRange {
  start: number;
  end: number;
  master: number;
  replicas: number[];
}

export interface StartClusterOptions {
  /** Masters, each with an even share of the 16384 slots. Default 3. */
  masters?: number;
  /** Replicas of each master. Default 0 (no failover possible). */
  replicasPerMaster?: number;
  /**
   * cluster-node-timeout: how long a silent node takes to be suspected (PFAIL). Default 1000 ms,
   * so a failover takes seconds; raise it for a cluster that must not fail over under CPU load.
   */
  nodeTimeoutMs?: number;
  /** Bound on each wait (nodes ready, cluster formed). Default 20 s. */
  timeoutMs?: number;
}

export interface MigrateSlotOptions {
  /** Keys per MIGRATE. Default 100. */
  batch?: number;
  /** Called after each batch, while the slot is half-moved (source MIGRATING, target IMPORTING); awaited. A throw leaves the slot half-moved. */
  onBatch?: (progress: MigrateProgress) => void | Promise<void>;
  /** Pause after each batch, to let other traffic in while the slot is half-moved. Default 0. */
  pauseMs?: number;
  /** MIGRATE's own timeout, in ms. Default 5000. */
  migrateTimeoutMs?: number;
  /** Bound on waiting for every node to agree on the new owner. Default 10 s. */
  timeoutMs?: number;
}

export interface MigrateProgress {
  slot: number;
  from: number;
  to: number;
  /** 1-based. */
  batch: number;
  /** The keys this batch moved. */
  keys: string[];
  /** Keys moved so far, this batch included. */
  moved: number;
}

export interface MigrateResult {
  slot: number;
  from: number;
  to: number;
  moved: number;
  batches: number;
}

class Node implements ClusterNode {
  role: ClusterRole;
  masterId: string | undefined;
  alive = true;
  id = '';

  constructor(
    readonly process: RedisProcess,
    readonly busPort: number,
    readonly admin: Redis,
    role: ClusterRole,
  ) {
    this.role = role;
  }

  get port(): number {
    return this.process.port;
  }

  get pid(): number {
    return this.process.pid;
  }
}

/**
 * A running cluster (see {@link startRedisCluster}). Queries (slotMap, masterOf, ownerOfKey) read
 * CLUSTER SLOTS live, so they are right after a failover or a migration; `nodes[].role` is
 * refreshed by the operations that wait for the cluster to settle.
 */
export class LocalCluster {
  private stopped = false;
  /** Slot ranges a master owned when killed, for waitForFailover. */
  private readonly ownedAtKill = new Map<number, SlotRange[]>();

  /** @internal use {@link startRedisCluster} */
  constructor(
    private readonly members: Node[],
    private readonly timeoutMs: number,
  ) {}

  get nodes(): readonly ClusterNode[] {
    return this.members;
  }

  /** Every node (dead ones too: a client skips those), as ioredis Cluster seeds. */
  seeds(): ClusterSeed[] {
    return this.members.map((n) => ({ host: '127.0.0.1', port: n.port }));
  }

  node(port: number): ClusterNode {
    return this.member(port);
  }

  /**
   * A new ioredis Cluster client on this cluster (the caller closes it). Its node connections
   * default to `disconnectTimeout: 0`: ioredis refreshes the slot map over a throwaway connection
   * after a MOVED, and one still in flight at quit() leaves a 2 s timer behind (jest then reports
   * it did not exit).
   */
  client(options: ClusterOptions = {}): Cluster {
    return new Cluster(this.seeds(), { ...options, redisOptions: { disconnectTimeout: 0, ...options.redisOptions } });
  }

  /** A new plain connection to one node (the caller closes it). */
  connect(port: number, options: RedisOptions = {}): Redis {
    return this.member(port).process.connect(options);
  }

  /** The slot map as `viaPort` (default: the first live node) sees it. */
  async slotMap(viaPort?: number): Promise<SlotRange[]> {
    const node = viaPort === undefined ? this.live()[0] : this.member(viaPort);
    if (!node) throw new Error('LocalCluster: no live node to ask');
    return parseSlots((await node.admin.call('CLUSTER', 'SLOTS')) as unknown[]);
  }

  /** The port of the master serving `slot`, as `viaPort` (default: the first live node) sees it. */
  async masterOf(slot: number, viaPort?: number): Promise<number> {
    const range = (await this.slotMap(viaPort)).find((r) => r.start <= slot && slot <= r.end);
    if (!range) throw new Error(`LocalCluster: slot ${slot} is not served by any master`);
    return range.master;
  }

  /** The port of the master serving `key`'s slot (hash tags respected). */
  ownerOfKey(key: string, viaPort?: number): Promise<number> {
    return this.masterOf(calculateSlot(key), viaPort);
  }

  /** SIGKILL a node: no shutdown, no failover handshake; the others find out by timeout. */
  async kill(port: number): Promise<void> {
    const node = this.member(port);
    if (!node.alive) throw new Error(`LocalCluster: node ${port} is already dead`);
    const others = this.live().filter((n) => n !== node);
    if (others.length)
      this.ownedAtKill.set(
        port,
        (await this.slotMap(others[0].port)).filter((r) => r.master === port),
      );
    node.alive = false;
    await node.process.kill('SIGKILL');
  }

  /**
   * Starts a killed node again (same port, same nodes.conf, hence same id; its data is gone:
   * no persistence) and waits until every live node lists it and agrees on the slot map — a
   * failed-over master comes back as a replica of its successor — and, as a replica, it has
   * synced. A node still running is SIGKILLed first.
   */
  async restart(port: number, timeoutMs = this.timeoutMs): Promise<void> {
    const node = this.member(port);
    node.alive = false;
    await node.process.restart('SIGKILL');
    node.alive = true;
    this.ownedAtKill.delete(port);
    await poll(`node ${port} to rejoin the cluster`, timeoutMs, async () => {
      const states = await this.liveStates();
      const maps = states.map((s) => s.map);
      const listed = maps.every((m) => m.some((r) => r.master === port || r.replicas.includes(port)));
      const self = states.find((s) => s.port === port)!;
      const synced = !self.info.includes('role:slave') || self.info.includes('master_link_status:up');
      return { done: allOk(states) && agree(maps) && listed && synced, state: summary(states) };
    });
    await this.refreshRoles();
  }

  /**
   * After {@link kill} of a master: waits until one of its replicas serves all the slots it
   * had and every live node says cluster_state:ok and agrees on the slot map. Returns the
   * promoted replica's port. Fails after `timeoutMs` (default 20 s) with each node's view.
   */
  async waitForFailover(deadPort: number, timeoutMs = this.timeoutMs): Promise<number> {
    const dead = this.member(deadPort);
    if (dead.alive) throw new Error(`waitForFailover: node ${deadPort} is alive; kill() it first`);
    const owned = this.ownedAtKill.get(deadPort) ?? [];
    if (!owned.length) throw new Error(`waitForFailover: node ${deadPort} served no slots when killed; nothing fails over`);
    const candidates = this.members.filter((n) => n.masterId === dead.id && n.alive).map((n) => n.port);
    if (!candidates.length) throw new Error(`waitForFailover: node ${deadPort} has no live replica; its slots stay down until restart()`);
    let promoted = 0;
    await poll(`a replica of ${deadPort} (${candidates.join(', ')}) to take over its slots`, timeoutMs, async () => {
      const states = await this.liveStates();
      const map = states[0].map;
      const owners = new Set(
        owned.flatMap((r) => [r.start, r.end]).map((slot) => map.find((m) => m.start <= slot && slot <= m.end)?.master),
      );
      const [owner] = owners;
      const done =
        allOk(states) && agree(states.map((s) => s.map)) && owners.size === 1 && owner !== undefined && candidates.includes(owner);
      if (done) promoted = owner!;
      return { done, state: summary(states) };
    });
    await this.refreshRoles();
    return promoted;
  }

  /**
   * Moves `slot` to the master on `toPort` by the live resharding protocol, by hand:
   * SETSLOT IMPORTING on the target, SETSLOT MIGRATING on the source, then GETKEYSINSLOT +
   * MIGRATE … KEYS in batches (between them the slot is half-moved: clients get ASK for keys
   * already moved, or not yet existing, and TRYAGAIN for multi-key commands spanning both
   * sides), and finally SETSLOT NODE on the target, the source and every other live master.
   * Resolves once every live node agrees on the new owner.
   */
  async migrateSlot(slot: number, toPort: number, options: MigrateSlotOptions = {}): Promise<MigrateResult> {
    const { batch = 100, onBatch, pauseMs = 0, migrateTimeoutMs = 5_000, timeoutMs = this.timeoutMs } = options;
    if (!Number.isInteger(slot) || slot < 0 || slot >= SLOTS) throw new Error(`migrateSlot: bad slot ${slot}`);
    const from = await this.masterOf(slot);
    if (from === toPort) throw new Error(`migrateSlot: slot ${slot} is already on ${toPort}`);
    const source = this.member(from);
    const target = this.member(toPort);
    if (!target.alive || !(await isMaster(target))) throw new Error(`migrateSlot: ${toPort} is not a live master`);

    // Target first: once the source says MIGRATING it sends ASK there, which must then be accepted.
    await target.admin.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', source.id);
    await source.admin.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', target.id);
    let moved = 0;
    let batches = 0;
    for (;;) {
      const keys = (await source.admin.call('CLUSTER', 'GETKEYSINSLOT', slot, batch)) as string[];
      if (!keys.length) break;
      // 'NOKEY' when every key of the batch expired meanwhile; anything else but OK throws.
      await source.admin.call('MIGRATE', '127.0.0.1', toPort, '', 0, migrateTimeoutMs, 'KEYS', ...keys);
      moved += keys.length;
      batches += 1;
      await onBatch?.({ slot, from, to: toPort, batch: batches, keys, moved });
      if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
    // Target first (it stops needing ASKING and bumps its config epoch), then the source (it stops
    // redirecting with ASK), then everyone else so no master keeps sending MOVED to the source.
    await target.admin.call('CLUSTER', 'SETSLOT', slot, 'NODE', target.id);
    await source.admin.call('CLUSTER', 'SETSLOT', slot, 'NODE', target.id);
    for (const other of this.live().filter((n) => n !== source && n !== target)) {
      if (await isMaster(other)) await other.admin.call('CLUSTER', 'SETSLOT', slot, 'NODE', target.id);
    }
    await poll(`every node to see slot ${slot} on ${toPort}`, timeoutMs, async () => {
      const states = await this.liveStates();
      const owners = states.map((s) => s.map.find((r) => r.start <= slot && slot <= r.end)?.master);
      return { done: allOk(states) && agree(states.map((s) => s.map)) && owners.every((o) => o === toPort), state: summary(states) };
    });
    await this.refreshRoles();
    return { slot, from, to: toPort, moved, batches };
  }

  /** Stops every node and removes their directories. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const node of this.members) node.admin.disconnect();
    await Promise.allSettled(this.members.map((n) => n.process.stop()));
  }

  /** @internal the bootstrap, see {@link startRedisCluster} */
  async form(masters: number, replicasPerMaster: number): Promise<void> {
    const nodes = this.members;
    await Promise.all(nodes.map((n) => n.admin.connect()));
    for (const node of nodes) node.id = String(await node.admin.call('CLUSTER', 'MYID'));
    // Distinct config epochs up front (as redis-cli --cluster create does), so nodes need not
    // resolve epoch collisions after meeting; only allowed while a node knows no other.
    for (const [i, node] of nodes.entries()) await node.admin.call('CLUSTER', 'SET-CONFIG-EPOCH', i + 1);
    const expected: SlotRange[] = [];
    for (let m = 0; m < masters; m++) {
      const start = Math.floor((m * SLOTS) / masters);
      const end = Math.floor(((m + 1) * SLOTS) / masters) - 1;
      await nodes[m].admin.call('CLUSTER', 'ADDSLOTSRANGE', start, end);
      const replicas = nodes.slice(masters + m * replicasPerMaster, masters + (m + 1) * replicasPerMaster);
      for (const replica of replicas) replica.masterId = nodes[m].id;
      expected.push({ start, end, master: nodes[m].port, replicas: replicas.map((r) => r.port).sort((a, b) => a - b) });
    }
    for (const node of nodes.slice(1)) await nodes[0].admin.call('CLUSTER', 'MEET', '127.0.0.1', node.port, node.busPort);
    // REPLICATE needs the replica to know its master: wait until the handshakes are done.
    await poll(`all ${nodes.length} nodes to know each other`, this.timeoutMs, async () => {
      const known = await Promise.all(
        nodes.map(
          async (n) => parseNodes(String(await n.admin.call('CLUSTER', 'NODES'))).filter((e) => !e.flags.includes('handshake')).length,
        ),
      );
      return { done: known.every((k) => k === nodes.length), state: known };
    });
    for (const replica of nodes.slice(masters)) await replica.admin.call('CLUSTER', 'REPLICATE', replica.masterId!);
    const want = JSON.stringify(expected);
    await poll(
      'the cluster to form (cluster_state:ok and the planned slot map on every node, replicas synced)',
      this.timeoutMs,
      async () => {
        const states = await this.liveStates();
        const synced = states.every((s) => !s.info.includes('role:slave') || s.info.includes('master_link_status:up'));
        return { done: allOk(states) && states.every((s) => JSON.stringify(s.map) === want) && synced, state: summary(states) };
      },
    );
    await this.refreshRoles();
  }

  private member(port: number): Node {
    const node = this.members.find((n) => n.port === port);
    if (!node) throw new Error(`LocalCluster: no node on port ${port} (nodes: ${this.members.map((n) => n.port).join(', ')})`);
    return node;
  }

  private live(): Node[] {
    return this.members.filter((n) => n.alive);
  }

  /** Each live node's CLUSTER INFO, slot map and INFO replication, read in parallel. */
  private liveStates(): Promise<NodeState[]> {
    return Promise.all(
      this.live().map(async (n) => ({
        port: n.port,
        clusterInfo: String(await n.admin.call('CLUSTER', 'INFO')),
        map: parseSlots((await n.admin.call('CLUSTER', 'SLOTS')) as unknown[]),
        info: String(await n.admin.call('INFO', 'replication')),
      })),
    );
  }

  /** Roles and masters from one live node's CLUSTER NODES (called once the cluster agrees). */
  private async refreshRoles(): Promise<void> {
    const [any] = this.live();
    if (!any) return;
    const entries = parseNodes(String(await any.admin.call('CLUSTER', 'NODES')));
    for (const node of this.members) {
      const entry = entries.find((e) => e.id === node.id);
      if (!entry) continue;
      node.role = entry.flags.includes('master') ? 'master' : 'replica';
      node.masterId = entry.master === '-' ? undefined : entry.master;
    }
  }
}

/**
 * Starts a cluster of `masters` masters with `replicasPerMaster` replicas each and resolves once
 * it is fully formed: cluster_state:ok on every node, every node's CLUSTER SLOTS equal to the plan
 * (slots split evenly, in port order of the masters), replicas synced. On failure every node
 * started is stopped.
 */
export async function startRedisCluster(options: StartClusterOptions = {}): Promise<LocalCluster> {
  const { masters = 3, replicasPerMaster = 0, nodeTimeoutMs = 1_000, timeoutMs = 20_000 } = options;
  if (!Number.isInteger(masters) || masters < 1) throw new Error(`startRedisCluster: masters must be a positive integer, got ${masters}`);
  if (!Number.isInteger(replicasPerMaster) || replicasPerMaster < 0)
    throw new Error(`startRedisCluster: bad replicasPerMaster ${replicasPerMaster}`);
  const count = masters * (1 + replicasPerMaster);
  const ports = await distinctFreePorts(count * 2);
  const started = await Promise.allSettled(
    Array.from({ length: count }, (_, i) => {
      const [port, busPort] = [ports[2 * i], ports[2 * i + 1]];
      const dir = mkdtempSync(join(tmpdir(), 'sluice-cluster-node-'));
      const args = [
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, 'nodes.conf'),
        '--cluster-node-timeout',
        String(nodeTimeoutMs),
        '--cluster-port',
        String(busPort),
        // Without it a node learns its own address from the first MEET it receives; node 0 of
        // the bootstrap only sends MEETs.
        '--cluster-announce-ip',
        '127.0.0.1',
        // A replica may take over however long its link was down (the default refuses a replica
        // disconnected for > 10 × node timeout), and replicas stay where the test put them.
        '--cluster-replica-validity-factor',
        '0',
        '--cluster-allow-replica-migration',
        'no',
        // Redis 7 waits 5 s by default before a diskless full sync, to batch replicas.
        '--repl-diskless-sync-delay',
        '0',
        // CLUSTER SLOTS leaves out a replica whose replication offset is still 0, and an idle
        // master only advances it with its replication PING, every 10 s by default.
        '--repl-ping-replica-period',
        '1',
      ];
      return RedisProcess.start({ port, dir, ownsDir: true, args }).then((server) => ({ server, busPort }));
    }),
  );
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  const ok = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  if (failed) {
    await Promise.allSettled(ok.map((s) => s.server.stop()));
    throw failed.reason;
  }
  const nodes = ok.map(({ server, busPort }, i) => {
    const admin = new Redis(server.port, '127.0.0.1', {
      lazyConnect: true,
      // Admin calls fail fast on a dead node (the polls retry) instead of queueing.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 100,
      // disconnect() arms a timer of this length on the last socket even when it is long closed
      // (a killed node's), which would hold the process open for 2 s after stop().
      disconnectTimeout: 0,
    });
    admin.on('error', () => undefined); // a killed node: reconnect attempts fail until restart
    return new Node(server, busPort, admin, i < masters ? 'master' : 'replica');
  });
  const cluster = new LocalCluster(nodes, timeoutMs);
  try {
    await cluster.form(masters, replicasPerMaster);
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  return cluster;
}

/** The slot of a namespace's keys: they all share the hash tag `{<prefix>:<namespace>}`. */
export function namespaceSlot(namespace: string, prefix = 'sluice'): number {
  return calculateSlot(`{${prefix}:${namespace}}`);
}

/**
 * A fresh random namespace (`<label>-<8 hex>`, like uniqueNamespace) whose keys hash to a slot
 * served by the master on `masterPort` — to put a test's namespace on a node it will then
 * kill or migrate away from.
 */
export async function namespaceOnShard(cluster: LocalCluster, masterPort: number, prefix = 'sluice', label = 't'): Promise<string> {
  const ranges = (await cluster.slotMap()).filter((r) => r.master === masterPort);
  if (!ranges.length) throw new Error(`namespaceOnShard: ${masterPort} serves no slots`);
  // Each try hits with probability (its share of the slots): a few dozen tries at most in practice.
  for (let i = 0; i < 100_000; i++) {
    const namespace = `${label}-${randomBytes(4).toString('hex')}`;
    const slot = namespaceSlot(namespace, prefix);
    if (ranges.some((r) => r.start <= slot && slot <= r.end)) return namespace;
  }
  throw new Error(`namespaceOnShard: no namespace found for ${masterPort}`);
}

interface NodeState {
  port: number;
  clusterInfo: string;
  map: SlotRange[];
  info: string;
}

interface NodesEntry {
  id: string;
  port: number;
  flags: string[];
  master: string;
}

function parseSlots(reply: unknown[]): SlotRange[] {
  return (reply as Array<[number, number, ...Array<[string, number, string]>]>)
    .map(([start, end, master, ...replicas]) => ({
      start,
      end,
      master: Number(master[1]),
      replicas: replicas.map((r) => Number(r[1])).sort((a, b) => a - b),
    }))
    .sort((a, b) => a.start - b.start);
}

/** CLUSTER NODES: `<id> <ip:port@cport[,hostname]> <flags> <master|-> …`. */
function parseNodes(text: string): NodesEntry[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [id, address, flags, master] = line.split(' ');
      return { id, port: Number(address.slice(address.lastIndexOf(':') + 1, address.indexOf('@'))), flags: flags.split(','), master };
    });
}

async function isMaster(node: Node): Promise<boolean> {
  const self = parseNodes(String(await node.admin.call('CLUSTER', 'NODES'))).find((e) => e.flags.includes('myself'));
  return !!self?.flags.includes('master');
}

function allOk(states: NodeState[]): boolean {
  return states.every((s) => s.clusterInfo.includes('cluster_state:ok'));
}

function agree(maps: SlotRange[][]): boolean {
  return maps.every((m) => JSON.stringify(m) === JSON.stringify(maps[0]));
}

/** Each node's view, compact, for timeout messages. */
function summary(states: NodeState[]): Record<number, string> {
  return Object.fromEntries(
    states.map((s) => [
      s.port,
      `${/cluster_state:(\w+)/.exec(s.clusterInfo)?.[1]} ${/role:(\w+)/.exec(s.info)?.[1]} ` +
        s.map.map((r) => `${r.start}-${r.end}@${r.master}${r.replicas.length ? `>${r.replicas.join('/')}` : ''}`).join(' '),
    ]),
  );
}

/**
 * Polls `probe` every 50 ms until it reports done; a probe that throws (a node restarting, a
 * connection not back yet) counts as not done. Fails after `timeoutMs` with the last state seen.
 */
async function poll(what: string, timeoutMs: number, probe: () => Promise<{ done: boolean; state: unknown }>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const { done, state } = await probe();
      if (done) return;
      last = state;
    } catch (error) {
      last = { error: (error as Error).message };
    }
    if (Date.now() > deadline)
      throw new Error(`LocalCluster: timed out after ${timeoutMs} ms waiting for ${what}; last state: ${JSON.stringify(last, null, 1)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** `count` free loopback ports, all different (freePort alone could hand the same one out twice). */
async function distinctFreePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) {
    const port = await freePort();
    if (port !== 6379) ports.add(port);
  }
  return [...ports];
}
