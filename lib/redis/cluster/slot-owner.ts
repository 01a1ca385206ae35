import IORedis from 'ioredis';
import type { ClusterSeed, ClusterSettings } from '../../interfaces/cluster.options';

/** Longest wait for one node's slot map while looking for the owner (a dead node must not stall discovery). */
const LOOKUP_TIMEOUT_MS = 2_000;

function addressOf(node: ClusterSeed): string {
  return `${node.host}:${node.port}`;
}

/** A host a node announces: empty or '?' (Redis 7 `cluster-announce-*` unset) means "the host you reached me at". */
function announcedHost(host: unknown, reachedAt: string): string {
  return typeof host === 'string' && host !== '' && host !== '?' ? host : reachedAt;
}

/**
 * Which master owns the namespace's slot. Sluice connects only to that node (every key of a
 * namespace is in one slot), so a cluster costs no more connections than one server. The owner
 * is learned from `CLUSTER SLOTS` of any reachable node (the seeds, then every node seen), kept
 * until a connection to it fails, and corrected at once by a `MOVED` reply (resharding, failover).
 */
export class SlotOwner {
  private owner?: ClusterSeed;
  private lookup?: Promise<ClusterSeed>;
  /** Every node seen, seeds first: where to ask when the owner is gone. */
  private readonly nodes = new Map<string, ClusterSeed>();
  private readonly listeners = new Set<(owner: ClusterSeed) => void>();
  /** Lookup connections open now, closed at once by {@link close}. */
  private readonly asking = new Set<IORedis>();
  private closed = false;

  constructor(
    private readonly settings: ClusterSettings,
    readonly slot: number,
    private readonly timeoutMs: number,
  ) {
    settings.seeds.forEach((seed) => this.nodes.set(addressOf(seed), seed));
  }

  /** The owner last seen, or found by asking the nodes. */
  current(): Promise<ClusterSeed> {
    return this.owner ? Promise.resolve(this.owner) : this.find();
  }

  /** Asks the nodes again (a connection to the owner failed: it may have failed over). One lookup at a time. */
  find(): Promise<ClusterSeed> {
    return (this.lookup ??= this.ask().finally(() => (this.lookup = undefined)));
  }

  /** Where to connect when no node names the owner: the last owner known, or the first seed. */
  fallback(): ClusterSeed {
    return this.owner ?? this.settings.seeds[0];
  }

  /** A `MOVED <slot> <host:port>` reply: the slot is served elsewhere now. */
  moved(to: string): void {
    const separator = to.lastIndexOf(':');
    this.set(this.map({ host: announcedHost(to.slice(0, separator), this.fallback().host), port: Number(to.slice(separator + 1)) }));
  }

  /** Called when the owner changes (not on the first discovery): connections pinned to the old one move. */
  onChange(listener: (owner: ClusterSeed) => void): void {
    this.listeners.add(listener);
  }

  /** Stops looking (the app shuts down): a lookup in progress fails at once rather than trying every node. */
  close(): void {
    this.closed = true;
    this.asking.forEach((redis) => redis.disconnect());
  }

  private set(owner: ClusterSeed): void {
    const previous = this.owner;
    this.owner = owner;
    this.nodes.set(addressOf(owner), owner);
    if (previous && addressOf(previous) !== addressOf(owner)) this.listeners.forEach((listener) => listener(owner));
  }

  private async ask(): Promise<ClusterSeed> {
    // The owner we knew is asked last: after a failure it is the node most likely down.
    const last = this.owner && addressOf(this.owner);
    const order = [...this.nodes.values()].sort((a, b) => Number(addressOf(a) === last) - Number(addressOf(b) === last));
    const errors: string[] = [];
    for (const node of order) {
      if (this.closed) throw new Error('the application is shutting down');
      try {
        const owner = this.ownerIn(await this.slotMap(node), node);
        this.set(owner);
        return owner;
      } catch (error) {
        errors.push(`${addressOf(node)}: ${(error as Error).message}`);
      }
    }
    throw new Error(`no Redis Cluster node named the owner of slot ${this.slot} (${errors.join('; ')})`);
  }

  /** Reads the owner from a `CLUSTER SLOTS` reply, learning every node it names. */
  private ownerIn(ranges: unknown[][], asked: ClusterSeed): ClusterSeed {
    let owner: ClusterSeed | undefined;
    for (const [start, end, ...servers] of ranges) {
      for (const [index, server] of (servers as unknown[][]).entries()) {
        const node = this.map({ host: announcedHost(server[0], asked.host), port: Number(server[1]) });
        this.nodes.set(addressOf(node), node);
        if (index === 0 && this.slot >= Number(start) && this.slot <= Number(end)) owner = node;
      }
    }
    if (!owner) throw new Error(`slot ${this.slot} is not served by any master (is the cluster down or still being set up?)`);
    return owner;
  }

  private map(node: ClusterSeed): ClusterSeed {
    const natMap = this.settings.natMap;
    const mapped = typeof natMap === 'function' ? natMap(addressOf(node)) : natMap?.[addressOf(node)];
    return mapped ?? node;
  }

  private async slotMap(node: ClusterSeed): Promise<unknown[][]> {
    const timeout = Math.min(this.timeoutMs, LOOKUP_TIMEOUT_MS);
    const redis = new IORedis({
      host: node.host,
      port: node.port,
      username: this.settings.username,
      password: this.settings.password,
      tls: this.settings.tls,
      connectionName: 'sluice:cluster-lookup',
      disableClientInfo: true,
      lazyConnect: true,
      enableReadyCheck: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      connectTimeout: timeout,
      commandTimeout: timeout,
      // ioredis otherwise keeps the process alive 2 s after a disconnect of a socket already closed.
      disconnectTimeout: 0,
    });
    redis.on('error', () => undefined);
    this.asking.add(redis);
    try {
      await redis.connect();
      return await redis.cluster('SLOTS');
    } finally {
      this.asking.delete(redis);
      redis.disconnect();
    }
  }
}
