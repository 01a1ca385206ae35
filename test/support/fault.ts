import 'reflect-metadata';
import { Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import Redis from 'ioredis';
import { QueueClient, QueueModule, QueueModuleOptions } from '../../lib';
import { RedisAdmin, RedisProcess } from './redis-process';
import { TcpProxy } from './tcp-proxy';

/**
 * Fault injection on a redis-server of the test's own (CLIENT PAUSE pauses every client of a
 * server, so these tests never use a shared one): hold a connection's next script with
 * `CLIENT PAUSE … WRITE`, then kill that connection while the script waits — the deterministic
 * way to lose a command in flight.
 */
export class ConnectionFaults {
  private readonly admin: RedisAdmin;

  constructor(redis: Redis) {
    this.admin = new RedisAdmin(redis);
  }

  /** Pauses every write command (scripts included) of every client until {@link unpause}. */
  pauseWrites(ms = 30_000): Promise<void> {
    return this.admin.pauseWrites(ms);
  }

  unpause(): Promise<void> {
    return this.admin.unpause();
  }

  /** Waits until the connection named `name` is held by the pause with a script (`cmd=fcall`, or `evalsha|eval` where functions are refused). */
  async heldScript(name: string, timeoutMs = 10_000): Promise<void> {
    await this.admin.clientsWhen(
      { namePrefix: name },
      (clients) => clients.some((client) => /b/.test(client.flags) && /^(fcall|eval)/.test(client.cmd)),
      `a script of ${name} held by the pause`,
      timeoutMs,
    );
  }

  /** The whole fault: hold `name`'s next script, kill its connection, release the pause. */
  async dropDuringScript<T>(name: string, trigger: () => Promise<T>): Promise<T> {
    await this.pauseWrites();
    const result = trigger();
    result.catch(() => undefined); // awaited by the caller
    try {
      await this.heldScript(name);
      expectKilled((await this.admin.killClients({ namePrefix: name })).length);
    } finally {
      await this.unpause();
    }
    return result;
  }
}

function expectKilled(killed: number): void {
  if (killed < 1) throw new Error('no connection was killed');
}

/** A Nest app with QueueModule on a given Redis URL (not the shared test server), initialised. */
export async function appOn(url: string, providers: Provider[], options: Partial<QueueModuleOptions> & { namespace: string }) {
  const app = await Test.createTestingModule({
    imports: [QueueModule.forRoot({ connection: { url }, ...options })],
    providers,
  }).compile();
  app.useLogger(process.env.SLUICE_TEST_LOGS ? ['log', 'warn', 'error'] : false);
  await app.init();
  let closed: Promise<void> | undefined;
  // Closing twice is harmless, so a test may close its app and its cleanup close it again.
  return { app, client: app.get(QueueClient), close: () => (closed ??= app.close()) };
}

/** A redis-server of the spec's own, a TCP proxy in front of it, and a direct connection to it. */
export interface ProxiedServer {
  readonly server: RedisProcess;
  readonly proxy: TcpProxy;
  /** Straight to the server, past the proxy: the test's own reads and writes. */
  readonly raw: Redis;
}

/**
 * Starts a {@link ProxiedServer} before the spec's tests (jest `beforeAll`) and stops it after
 * (`afterAll`); read its parts in the tests, once started.
 */
export function proxiedServer(): ProxiedServer {
  let parts: { server: RedisProcess; proxy?: TcpProxy; raw?: Redis } | undefined;
  const started = () => {
    if (!parts?.proxy || !parts.raw) throw new Error('proxiedServer: read its parts in a test, after beforeAll');
    return parts as Required<typeof parts>;
  };
  beforeAll(async () => {
    parts = { server: await RedisProcess.start() };
    parts.proxy = await TcpProxy.start({ port: parts.server.port });
    parts.raw = new Redis(parts.server.url);
  });
  afterAll(async () => {
    parts?.raw?.disconnect();
    await parts?.proxy?.close();
    await parts?.server.stop();
  });
  return {
    get server() {
      return started().server;
    },
    get proxy() {
      return started().proxy;
    },
    get raw() {
      return started().raw;
    },
  };
}
