import { createConnection } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { AbstractConnector, type RedisOptions } from 'ioredis';
import type { SlotOwner } from './slot-owner';

type NetStream = ReturnType<typeof createConnection>;

/**
 * An ioredis connector that connects to whichever master owns the namespace's slot, as
 * SentinelConnector does for a Sentinel's master: the first connect uses the owner last seen,
 * and every reconnect asks the cluster again, so a connection whose master died comes back on
 * the replica that took over, under ioredis's own reconnect loop and Sluice's bounds.
 */
export function slotOwnerConnector(owner: SlotOwner, tls?: ConnectionOptions): NonNullable<RedisOptions['Connector']> {
  return class SlotOwnerConnector extends AbstractConnector {
    private connectedBefore = false;

    constructor(options: { disconnectTimeout?: number }) {
      super(options.disconnectTimeout ?? 2_000);
    }

    async connect(): Promise<NetStream> {
      this.connecting = true;
      // A failed lookup must not reject: ioredis ends a connection whose connector rejects and
      // never retries it. Connecting to the last owner known (or a seed) fails like any
      // unreachable node instead, and ioredis's reconnect loop asks again.
      const address = await (this.connectedBefore ? owner.find() : owner.current()).catch(() => owner.fallback());
      this.connectedBefore = true;
      if (!this.connecting) throw new Error('Connection is closed.');
      const stream = tls
        ? tlsConnect({ ...tls, host: address.host, port: address.port })
        : createConnection({ host: address.host, port: address.port });
      stream.once('error', (error: Error) => {
        this.firstError = error;
      });
      this.stream = stream;
      return stream;
    }
  } as unknown as NonNullable<RedisOptions['Connector']>;
}
