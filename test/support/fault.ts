import 'reflect-metadata';
import { Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import Redis from 'ioredis';
import { QueueClient, QueueModule, QueueModuleOptions } from '../../lib';
import { RedisAdmin } from './redis-process';

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
