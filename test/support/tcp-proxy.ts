import { EventEmitter } from 'node:events';
import { AddressInfo, createServer, Server, Socket, connect } from 'node:net';

/**
 * A loopback TCP proxy between clients and a redis-server, for silent network loss: a blackhole
 * stops forwarding in both directions without closing or resetting either socket, so neither
 * side sees an error — the client's commands and the server's replies simply never arrive, as
 * in a network partition. Used by test/chaos.
 *
 * Semantics, chosen to behave like a partition and documented here because they matter:
 * - **Data sent during a blackhole is dropped, not buffered.** Bytes are read and discarded,
 *   counted per connection (`droppedBytes`). After `restore()` forwarding resumes with whatever
 *   is sent next. Caveat: a real TCP connection never loses bytes and carries on — it either
 *   delivers them late (short partition) or dies (long partition). A connection that lost bytes
 *   here is *desynchronised*: a command whose bytes were dropped never runs and gets no reply,
 *   so a client that pipelines (ioredis) pairs the next reply it reads with that command; a frame
 *   cut in half may be completed by the next command's bytes and be refused by Redis as a
 *   protocol error. Such a connection is `tainted`. To model the realistic end of a long
 *   partition — both peers finally see a reset and the client reconnects — call
 *   `restore({ resetTainted: true })`, which resets (RST) every tainted connection and forwards
 *   again on the others.
 * - A close (FIN or reset) by either side during a blackhole is not passed on (it is lost like
 *   data); it is passed on at `restore()`.
 * - A connection accepted during a blanket blackhole (`blackhole()` with no filter) opens no
 *   upstream connection until `restore()`: the server does not see it. (Unlike a real partition,
 *   the client's connect succeeds: the proxy accepts it locally.)
 * - Data a client sends before its upstream connection is established is held and sent in order
 *   once it is (that is connection setup, not loss).
 */

export interface ProxyTarget {
  port: number;
  host?: string;
}

export interface ProxyConnection {
  readonly id: number;
  /** The client's address as the proxy sees it, `ip:port`. */
  readonly clientAddress: string;
  /** The proxy's upstream socket as the server sees it (`addr` in CLIENT LIST), once connected. */
  readonly upstreamAddress?: string;
  readonly blackholed: boolean;
  /** Bytes dropped by a blackhole, both directions. */
  readonly droppedBytes: number;
  /** Lost bytes in a blackhole: see the module comment. */
  readonly tainted: boolean;
}

interface Pipe {
  id: number;
  client: Socket;
  upstream?: Socket;
  upstreamReady: boolean;
  pendingToUpstream: Buffer[];
  blackholed: boolean;
  droppedBytes: number;
  /** A side closed while blackholed: the close reaches the other side at restore. */
  closedDuringBlackhole: boolean;
  /** The server's bytes held back by {@link TcpProxy.holdReplies}, in order; undefined when not holding. */
  heldReplies?: Buffer[];
  clientClosed: boolean;
  upstreamClosed: boolean;
}

export class TcpProxy {
  private readonly server: Server;
  private readonly pipes = new Map<number, Pipe>();
  private readonly events = new EventEmitter();
  private nextId = 1;
  private accepted = 0;
  /** A blanket blackhole: every connection, including those accepted from now on. */
  private partitioned = false;
  private closing = false;
  /** New connections are reset at once (see {@link refuseNew}); open ones are untouched. */
  private refusing = false;
  /** Client bytes that blackhole their connection (see {@link blackholeOn}). */
  private trigger?: Buffer;
  private refusedCount = 0;

  private constructor(
    private readonly target: Required<ProxyTarget>,
    readonly port: number,
    server: Server,
  ) {
    this.server = server;
    this.events.setMaxListeners(0);
  }

  /** Starts a proxy on 127.0.0.1 (a free port unless `listenPort` is given) to `target`. */
  static async start(target: ProxyTarget, listenPort = 0): Promise<TcpProxy> {
    const server = createServer({ pauseOnConnect: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(listenPort, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    const proxy = new TcpProxy({ host: target.host ?? '127.0.0.1', port: target.port }, (server.address() as AddressInfo).port, server);
    server.on('connection', (socket) => proxy.accept(socket));
    return proxy;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Client connections through the proxy now (a pair counts until both of its sockets closed). */
  get liveConnections(): number {
    return this.pipes.size;
  }

  /** Client connections accepted since the start. */
  get totalConnections(): number {
    return this.accepted;
  }

  /** Client connections reset by {@link refuseNew} since the start. */
  get refusedConnections(): number {
    return this.refusedCount;
  }

  /**
   * Resets (RST) every new client connection as soon as it is accepted, until {@link acceptNew}:
   * a reconnect fails at once, while the connections already open carry on. For a fault that
   * takes one connection away for good and leaves the others working.
   */
  refuseNew(): void {
    this.refusing = true;
  }

  acceptNew(): void {
    this.refusing = false;
  }

  connections(): ProxyConnection[] {
    return [...this.pipes.values()].map((pipe) => ({
      id: pipe.id,
      clientAddress: `${pipe.client.remoteAddress}:${pipe.client.remotePort}`,
      upstreamAddress: pipe.upstream?.localPort ? `${pipe.upstream.localAddress}:${pipe.upstream.localPort}` : undefined,
      blackholed: pipe.blackholed,
      droppedBytes: pipe.droppedBytes,
      tainted: pipe.droppedBytes > 0,
    }));
  }

  /**
   * Stops forwarding, in both directions, on the connections `match` accepts — or, without
   * `match`, on every connection, including those accepted until `restore()`. Nothing is
   * closed or reset. Returns how many open connections it affected.
   */
  blackhole(match?: (connection: ProxyConnection) => boolean): number {
    if (!match) this.partitioned = true;
    const chosen = new Set(
      match
        ? this.connections()
            .filter(match)
            .map((c) => c.id)
        : this.pipes.keys(),
    );
    for (const id of chosen) {
      const pipe = this.pipes.get(id)!;
      pipe.blackholed = true;
      // Keep reading (and dropping): a paused socket would let the kernel buffer the data.
      pipe.client.resume();
      pipe.upstream?.resume();
    }
    return chosen.size;
  }

  /**
   * Blackholes a connection (as {@link blackhole}) as soon as its client sends `bytes` — the chunk
   * that holds them is dropped too — until {@link restore}: to lose one kind of command, e.g.
   * `FUNCTION LOAD`, whenever it is sent, on a connection that carries other commands before it.
   * Armed for connections opened later as well. (A command split across chunks at the point of the
   * match would slip through; the commands it is used for are written whole.)
   */
  blackholeOn(bytes: string): void {
    this.trigger = Buffer.from(bytes);
  }

  /**
   * Holds back what the server sends on the connections `match` accepts, in order, until
   * {@link releaseReplies}: a one-way delay, not a loss. The client's commands still reach the
   * server and run; their replies arrive late. For ordering races between a client's
   * connections (a reply on one processed after a reply on another). Returns how many open
   * connections it affected.
   */
  holdReplies(match: (connection: ProxyConnection) => boolean): number {
    const chosen = this.connections().filter(match);
    for (const { id } of chosen) this.pipes.get(id)!.heldReplies ??= [];
    return chosen.length;
  }

  /** Sends on every held reply (or only those of the connections `match` accepts), in order, and stops holding them. */
  releaseReplies(match?: (connection: ProxyConnection) => boolean): void {
    const chosen =
      match &&
      new Set(
        this.connections()
          .filter(match)
          .map((c) => c.id),
      );
    for (const pipe of this.pipes.values()) {
      if (chosen && !chosen.has(pipe.id)) continue;
      const held = pipe.heldReplies;
      pipe.heldReplies = undefined;
      if (held?.length) pipe.client.write(Buffer.concat(held));
    }
  }

  /**
   * Forwards again on every connection. Data sent meanwhile stays dropped; closes that happened
   * meanwhile reach the other side now. With `resetTainted`, connections that lost bytes are
   * reset (RST on both sides) instead: see the module comment.
   */
  restore(options: { resetTainted?: boolean } = {}): void {
    this.partitioned = false;
    this.trigger = undefined;
    for (const pipe of [...this.pipes.values()]) {
      pipe.blackholed = false;
      if (pipe.closedDuringBlackhole) {
        this.destroy(pipe, false);
      } else if (options.resetTainted && pipe.droppedBytes > 0) {
        this.destroy(pipe, true);
      } else if (!pipe.upstream) {
        this.openUpstream(pipe);
      }
    }
  }

  /**
   * Resolves once the live connection count satisfies `ready` (an event: connections opening
   * and closing), failing after `timeoutMs`.
   */
  whenConnections(ready: (live: number) => boolean, what: string, timeoutMs = 10_000): Promise<number> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!ready(this.pipes.size)) return;
        clearTimeout(timer);
        this.events.off('change', check);
        resolve(this.pipes.size);
      };
      const timer = setTimeout(() => {
        this.events.off('change', check);
        reject(new Error(`proxy ${this.port}: no ${what} within ${timeoutMs} ms (live connections: ${this.pipes.size})`));
      }, timeoutMs);
      this.events.on('change', check);
      check();
    });
  }

  /** Stops accepting, closes every connection (both sides) and the listening socket. */
  async close(): Promise<void> {
    this.closing = true;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const pipe of [...this.pipes.values()]) this.destroy(pipe, false);
    await closed;
    await this.whenConnections((n) => n === 0, 'every connection closed');
  }

  private accept(client: Socket): void {
    if (this.closing) {
      client.destroy();
      return;
    }
    if (this.refusing) {
      this.refusedCount++;
      client.on('error', () => undefined);
      client.resetAndDestroy();
      return;
    }
    this.accepted++;
    const pipe: Pipe = {
      id: this.nextId++,
      client,
      upstreamReady: false,
      pendingToUpstream: [],
      blackholed: this.partitioned,
      droppedBytes: 0,
      closedDuringBlackhole: false,
      clientClosed: false,
      upstreamClosed: false,
    };
    this.pipes.set(pipe.id, pipe);
    client.setNoDelay(true);
    client.on('error', () => undefined); // a reset shows up as 'close' as well
    client.on('data', (chunk: Buffer) => {
      if (this.trigger && !pipe.blackholed && chunk.includes(this.trigger)) pipe.blackholed = true;
      if (pipe.blackholed) {
        pipe.droppedBytes += chunk.length;
      } else if (!pipe.upstreamReady) {
        pipe.pendingToUpstream.push(chunk);
      } else if (!pipe.upstream!.write(chunk)) {
        client.pause();
        pipe.upstream!.once('drain', () => client.resume());
      }
    });
    client.on('close', () => {
      pipe.clientClosed = true;
      this.sideClosed(pipe);
    });
    if (!pipe.blackholed) this.openUpstream(pipe);
    client.resume();
    this.events.emit('change');
  }

  private openUpstream(pipe: Pipe): void {
    const upstream = connect({ host: this.target.host, port: this.target.port });
    pipe.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.on('error', () => undefined);
    upstream.once('connect', () => {
      pipe.upstreamReady = true;
      for (const chunk of pipe.pendingToUpstream.splice(0)) upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (pipe.blackholed) {
        pipe.droppedBytes += chunk.length;
      } else if (pipe.heldReplies) {
        pipe.heldReplies.push(chunk);
      } else if (!pipe.client.write(chunk)) {
        upstream.pause();
        pipe.client.once('drain', () => upstream.resume());
      }
    });
    upstream.on('close', () => {
      pipe.upstreamClosed = true;
      this.sideClosed(pipe);
    });
  }

  private sideClosed(pipe: Pipe): void {
    const bothClosed = pipe.clientClosed && (pipe.upstreamClosed || !pipe.upstream);
    if (bothClosed) {
      if (this.pipes.delete(pipe.id)) this.events.emit('change');
      return;
    }
    if (pipe.blackholed && !this.closing) {
      pipe.closedDuringBlackhole = true;
      return;
    }
    this.destroy(pipe, false);
  }

  private destroy(pipe: Pipe, reset: boolean): void {
    for (const socket of [pipe.client, pipe.upstream]) {
      if (!socket || socket.destroyed) continue;
      if (reset) socket.resetAndDestroy();
      else socket.destroy();
    }
    // Sockets that never connected emit no 'close' of their own on every Node path: settle here.
    if (!pipe.upstream) pipe.upstreamClosed = true;
  }
}
