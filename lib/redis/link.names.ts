import type { Redis } from 'ioredis';
import type { OutageLogger } from '../util/outage-log';
import { quotedReply } from './command.refusal';
import type { Role } from './link.options';

/**
 * A refusal that lasts: an ACL without `+client|setname` (or without `CLIENT` at all), a proxy or
 * managed service that does not have the command.
 */
const SETNAME_REFUSED = /^(NOPERM|ERR unknown (sub)?command)/i;

/**
 * Names the connections of one process to one Redis, `<prefix>:<role>` (`sluice:<namespace>:command`…),
 * with `CLIENT SETNAME`, so that CLIENT LIST and a server's monitoring tell them apart. Shared by
 * the process's links.
 *
 * The name is a convenience: nothing in Sluice reads it back. So a refusal never fails or delays a
 * connection (the name goes out in the ready check's write, and nobody waits for its reply), and
 * it is said once per process, at log level. After a lasting refusal the name is not sent again,
 * by any of the process's connections nor on their reconnects: each refused command is an entry
 * in the server's ACL LOG and an error in its `INFO errorstats`, which managed services chart.
 */
export class ConnectionNames {
  private refused = false;
  private reported = false;

  constructor(
    private readonly prefix: string,
    private readonly logger: OutageLogger,
  ) {}

  /** Sends the role's name over `redis`, unless Redis refused names for good; its reply is not waited for. */
  send(redis: Redis, role: Role): void {
    if (this.refused) return;
    const name = `${this.prefix}:${role}`;
    redis.client('SETNAME', name).catch((error: Error) => this.refusal(error, name));
  }

  private refusal(error: Error, name: string): void {
    // A lost reply (the connection closed) is no refusal: its reconnect names the connection again.
    if (error?.name !== 'ReplyError') return;
    if (SETNAME_REFUSED.test(error.message)) this.refused = true;
    if (this.reported) return;
    this.reported = true;
    this.logger.log(
      `Redis refused CLIENT SETNAME (${quotedReply(error.message)}): Sluice's connections stay unnamed in CLIENT LIST (${name} and its siblings); ` +
        'nothing else depends on the name (grant +client|setname to name them)',
    );
  }
}
