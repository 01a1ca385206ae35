import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { AddressInfo, createServer, Server, Socket, connect } from 'node:net';
import Redis from 'ioredis';
import { RedisAdmin, RedisProcess, signalProcess, sluiceConnectionName } from '../support/redis-process';
import { TcpProxy } from '../support/tcp-proxy';
import { deferred, pollUntil } from '../support/workflows';

/** The fault-injection tools themselves (test/support/redis-process.ts, tcp-proxy.ts). */
jest.setTimeout(60_000);

const cleanups: Array<() => unknown> = [];
/** QUIT while the server answers; a connection already gone is left alone (ioredis' disconnect would arm a 2 s timer). */
const closeClient = (client: Redis) => (client.status === 'end' ? undefined : client.quit().catch(() => client.disconnect()));
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('RedisProcess', () => {
  it('survives SIGKILL with its AOF on restart (same port, same dir), and SIGSTOP/SIGCONT freeze and thaw it', async () => {
    const server = await RedisProcess.start({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    cleanups.push(() => server.stop());
    const client = server.connect();
    client.on('error', () => undefined); // the kill drops the connection; it reconnects
    cleanups.push(() => closeClient(client));
    await client.set('k', 'v');
    const { port, pid } = server;

    await server.kill('SIGKILL');
    expect(server.state()).toBe('exited');
    await server.restart();
    expect(server.port).toBe(port);
    expect(server.pid).not.toBe(pid);
    expect(await client.get('k')).toBe('v'); // reconnected; the AOF was replayed

    await server.kill('SIGSTOP');
    expect(server.state()).toBe('stopped');
    const pong = client.ping(); // unanswered until the thaw
    await server.kill('SIGCONT');
    expect(server.state()).toBe('running');
    expect(await pong).toBe('PONG');

    const dir = server.dir;
    await closeClient(client);
    await server.stop();
    expect(existsSync(dir)).toBe(false);
  });

  it('kills clients by name prefix and type, and pauses writes until unpaused', async () => {
    const server = await RedisProcess.start();
    cleanups.push(() => server.stop());
    const admin = new RedisAdmin(server.connect());
    cleanups.push(() => admin.close());
    const named = (name: string) => {
      const c = server.connect({ connectionName: name, retryStrategy: () => null });
      c.on('error', () => undefined);
      cleanups.push(() => closeClient(c));
      return c;
    };
    const command = named(sluiceConnectionName('ns1', 'command'));
    const subscriber = named(sluiceConnectionName('ns1', 'subscriber'));
    const other = named(sluiceConnectionName('ns2', 'command'));
    await Promise.all([command.ping(), subscriber.subscribe('ch'), other.ping()]);

    const ns1 = await admin.clients({ namePrefix: sluiceConnectionName('ns1') });
    expect(ns1.map((c) => `${c.name} ${c.type}`).sort()).toEqual(['sluice:ns1:command normal', 'sluice:ns1:subscriber pubsub']);
    await expect(admin.killClients({})).rejects.toThrow(/namePrefix/);

    const closed = once(subscriber, 'end');
    const killed = await admin.killClients({ namePrefix: 'sluice:ns1:', type: 'pubsub' });
    expect(killed.map((c) => c.name)).toEqual(['sluice:ns1:subscriber']);
    await closed;
    expect((await admin.clients({ namePrefix: 'sluice:' })).map((c) => c.name).sort()).toEqual([
      'sluice:ns1:command',
      'sluice:ns2:command',
    ]);

    await admin.pauseWrites(30_000);
    const write = command.set('paused-key', '1');
    // Held by the pause: CLIENT LIST shows it blocked (flag b); reads carry on meanwhile.
    await admin.clientsWhen(
      { namePrefix: 'sluice:ns1:command' },
      (cs) => cs.some((c) => c.flags.includes('b')),
      'the write held by the pause',
    );
    expect(await other.get('paused-key')).toBeNull();
    await admin.unpause();
    expect(await write).toBe('OK');
    expect(await other.get('paused-key')).toBe('1');
  });

  it('signalProcess freezes and thaws any process', async () => {
    const server = await RedisProcess.start();
    cleanups.push(() => server.stop());
    await signalProcess(server.pid, 'SIGSTOP');
    expect(server.state()).toBe('stopped');
    await signalProcess(server.pid, 'SIGCONT');
    expect(server.state()).toBe('running');
  });
});

describe('TcpProxy', () => {
  /** An echo server that records whether its side of each connection closed. */
  async function echoServer(): Promise<{ port: number; closes: number; server: Server }> {
    const state = {
      port: 0,
      closes: 0,
      server: createServer((socket) => {
        socket.on('data', (chunk) => socket.write(chunk));
        socket.on('error', () => undefined);
        socket.on('close', () => state.closes++);
      }),
    };
    state.server.listen(0, '127.0.0.1');
    await once(state.server, 'listening');
    state.port = (state.server.address() as AddressInfo).port;
    cleanups.push(() => new Promise((resolve) => state.server.close(resolve)));
    return state;
  }

  function reader(socket: Socket) {
    let received = '';
    let waiting: { text: string; done: () => void } | undefined;
    socket.on('data', (chunk) => {
      received += chunk.toString();
      if (waiting && received.includes(waiting.text)) waiting.done();
    });
    return {
      get received() {
        return received;
      },
      until(text: string) {
        const d = deferred();
        if (received.includes(text)) return Promise.resolve();
        waiting = { text, done: () => d.resolve() };
        return d.promise;
      },
    };
  }

  it('forwards, blackholes without closing (dropping the bytes), forwards again, and passes on a close at restore', async () => {
    const echo = await echoServer();
    const proxy = await TcpProxy.start({ port: echo.port });
    cleanups.push(() => proxy.close());
    const socket = connect(proxy.port, '127.0.0.1');
    socket.on('error', () => undefined);
    cleanups.push(() => socket.destroy());
    const input = reader(socket);

    socket.write('one;');
    await input.until('one;');
    expect(proxy.liveConnections).toBe(1);

    expect(proxy.blackhole()).toBe(1);
    socket.write('lost;');
    await pollUntil(
      async () => proxy.connections()[0].droppedBytes,
      (n) => n === 5,
      'the proxy dropping the bytes',
    );
    expect(proxy.connections()[0]).toMatchObject({ blackholed: true, tainted: true });
    expect(socket.destroyed).toBe(false);
    expect(proxy.liveConnections).toBe(1);

    proxy.restore();
    socket.write('two;');
    await input.until('two;');
    expect(input.received).toBe('one;two;'); // 'lost;' never arrived

    // A close during a blackhole is lost too, until the restore.
    proxy.blackhole();
    socket.end();
    await once(socket, 'close');
    expect(echo.closes).toBe(0);
    expect(proxy.liveConnections).toBe(1);
    proxy.restore();
    await proxy.whenConnections((n) => n === 0, 'the pair closing');
    await pollUntil(
      async () => echo.closes,
      (n) => n === 1,
      'the upstream side closing',
    );
    expect(proxy.totalConnections).toBe(1);

    // close() closes both sides of every live connection.
    const last = connect(proxy.port, '127.0.0.1');
    last.on('error', () => undefined);
    const lastInput = reader(last);
    last.write('three;');
    await lastInput.until('three;');
    const lastClosed = once(last, 'close');
    await proxy.close();
    await lastClosed;
    expect(proxy.liveConnections).toBe(0);
    await pollUntil(
      async () => echo.closes,
      (n) => n === 2,
      'the upstream side closing',
    );
  });

  it('silences a Redis client without an error; restore({ resetTainted }) resets it, and it reconnects', async () => {
    const server = await RedisProcess.start();
    cleanups.push(() => server.stop());
    const proxy = await TcpProxy.start({ port: server.port });
    cleanups.push(() => proxy.close());
    const admin = new RedisAdmin(server.connect());
    cleanups.push(() => admin.close());
    const client = new Redis(proxy.port, '127.0.0.1', { connectionName: 'proxied', maxRetriesPerRequest: null });
    const errors: string[] = [];
    client.on('error', (error: Error) => errors.push(error.message));
    cleanups.push(() => closeClient(client));
    expect(await client.ping()).toBe('PONG');
    const [seen] = await admin.clients({ namePrefix: 'proxied' });
    expect(proxy.connections()[0].upstreamAddress).toBe(seen.addr); // a proxied connection is found in CLIENT LIST by address

    proxy.blackhole();
    const incr = client.incr('counter');
    await pollUntil(
      async () => proxy.connections()[0].droppedBytes,
      (n) => n > 0,
      'the INCR dropped',
    );
    expect(await admin.redis.get('counter')).toBeNull(); // it never reached the server
    expect(errors).toEqual([]);
    expect((await admin.clients({ namePrefix: 'proxied' })).map((c) => c.addr)).toEqual([seen.addr]); // the server still has it

    proxy.restore({ resetTainted: true });
    expect(await incr).toBe(1); // ioredis reconnected and sent it again
    expect(proxy.totalConnections).toBe(2);
    await proxy.whenConnections((n) => n === 1, 'one live connection');
    await closeClient(client);
    await proxy.whenConnections((n) => n === 0, 'the client gone');
  });
});
