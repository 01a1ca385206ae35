import type { Redis } from 'ioredis';

/**
 * A connection's calls go out with its ready check, before Redis has said anything (see
 * LinkConnection): a server almost always answers. One that closes connections without a word —
 * a TLS-only port reached without TLS (it drops what is not a TLS handshake), a proxy with nothing
 * behind it — would lose every call sent so: a lost reply, outcome unknown, although nothing ran.
 * So once a connection closed before any reply to its check, the next ones wait for that reply
 * before they send the calls waiting for them, until a check is answered again: calls made then
 * wait for a connection that answers and, past their bound, fail as never sent.
 */
export class SilentCloseWatch {
  /** The connection whose check has had no reply yet. */
  private pending?: Redis;
  /** The last connection closed before any reply: the calls wait for the next one's check. */
  cautious = false;

  checkSent(redis: Redis): void {
    this.pending = redis;
  }

  /** Any reply to the check (ready, loading, refused): the server talks. */
  answered(redis: Redis): void {
    if (this.pending === redis) this.pending = undefined;
    this.cautious = false;
  }

  /** `redis` closed: why, for the calls' errors, if it closed before any reply. */
  closed(redis: Redis): string | undefined {
    if (this.pending !== redis) return undefined;
    this.pending = undefined;
    this.cautious = true;
    return redis.options.tls
      ? 'the connection closed before Redis answered anything'
      : 'the connection closed before Redis answered anything: if that port takes TLS, use a rediss:// URL or connection.tls';
  }
}
