import Redis from 'ioredis';
import type { RedisConnectionOptions } from '../../lib';
import { type LocalRedis, startRedisServer } from './redis-server';

/**
 * A Redis as managed services and proxies leave it to an app: some commands refused to its user
 * (an ACL, NOPERM) or unknown to every client (the server's own `rename-command`, as a proxy or a
 * managed service without the command answers). For test/e2e/managed-limits.spec.ts.
 */

/** What a refused command costs, and so which line the app's boot must say once. */
export interface Refusals {
  /** The command whose refusal sends the scripts through EVALSHA (the first one Sluice meets). */
  functions?: 'FUNCTION LOAD' | 'FCALL';
  info?: true;
  config?: true;
  setname?: true;
}

export interface Cell {
  name: string;
  /** ACL rules the app's user gets after `+@all` (NOPERM replies). */
  deny?: string[];
  /** Commands the server renames (`rename-command`): unknown to every client ("ERR unknown command"). */
  unknown?: string[];
  refused: Refusals;
}

export const APP_USER = { username: 'app', password: 'app-secret' };

/** A private redis-server set up for `cell`, the app's connection options, and an admin connection that may do anything. */
export class ManagedRedis {
  private constructor(
    readonly cell: Cell,
    readonly server: LocalRedis,
    private readonly admin: Redis,
  ) {}

  static async start(cell: Cell): Promise<ManagedRedis> {
    const renames = (cell.unknown ?? []).flatMap((command) => ['--rename-command', command, hidden(command)]);
    const server = await startRedisServer(renames);
    // Bounded replies; no ready check of its own (INFO may be renamed).
    const admin = new Redis(server.url, { commandTimeout: 5_000, enableReadyCheck: false, maxRetriesPerRequest: 1 });
    const managed = new ManagedRedis(cell, server, admin);
    const { username, password } = APP_USER;
    await admin.call('ACL', 'SETUSER', username, 'reset', 'on', `>${password}`, '~*', '&*', '+@all', ...(cell.deny ?? []));
    return managed;
  }

  get connection(): RedisConnectionOptions {
    return { url: this.server.url, ...APP_USER };
  }

  /** `command` as the admin sends it: under its hidden name where the server renamed it. */
  call(command: string, ...args: (string | number)[]): Promise<unknown> {
    return this.admin.call(this.cell.unknown?.includes(command) ? hidden(command) : command, ...args);
  }

  /** The names of the function libraries the server holds. */
  async libraries(): Promise<string[]> {
    const list = (await this.call('FUNCTION', 'LIST')) as unknown[][];
    return list.map((entry) => String(entry[1]));
  }

  /** How many times the server ran `command` (INFO commandstats `calls`). */
  async calls(command: string): Promise<number> {
    const stats = String(await this.call('INFO', 'commandstats'));
    return Number(new RegExp(`^cmdstat_${command.replace('|', '\\|')}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0);
  }

  /** The connections of the app's user: their names (`name=`, '' when unnamed). */
  async appConnectionNames(): Promise<string[]> {
    const list = String(await this.call('CLIENT', 'LIST'));
    return list
      .split('\n')
      .filter((line) => new RegExp(`(?:^| )user=${APP_USER.username}(?: |$)`).test(line))
      .map((line) => /(?:^| )name=(\S*)/.exec(line)?.[1] ?? '');
  }

  /** How many times the server refused the app's user `object` (a command, e.g. `client|setname`): the ACL LOG's count. */
  async aclRefusals(object: string): Promise<number> {
    const entries = (await this.call('ACL', 'LOG')) as unknown[][];
    return entries
      .map((entry) => Object.fromEntries(Array.from({ length: entry.length / 2 }, (_, i) => [String(entry[2 * i]), entry[2 * i + 1]])))
      .filter((entry) => entry.object === object && entry.username === APP_USER.username)
      .reduce((sum, entry) => sum + Number(entry.count), 0);
  }

  async stop(): Promise<void> {
    this.admin.disconnect();
    await this.server.stop();
  }
}

/** The name a renamed command keeps, for the admin. */
function hidden(command: string): string {
  return `sluice-test-hidden-${command.toLowerCase()}`;
}
