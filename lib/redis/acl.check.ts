import { RedisCommandError } from '../errors';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { ACL_OPTIONAL, aclCommands, aclPattern, type AclRole } from './acl.rules';
import type { LuaScriptsProvider } from './lua-scripts.provider';
import type { RedisConnections } from './redis.connections';
import type { RedisKeys } from './redis.keys';

/** Where the rules are explained (named in every ACL error). */
export const ACL_DOCS = 'docs/connections.md#acl-users';

type AclOptions = Pick<ResolvedQueueOptions, 'prefix' | 'namespace' | 'cluster'>;

/**
 * The boot check of a process that connects as a named Redis ACL user (not `default`): does the
 * user hold what this process's role needs (see acl.rules.ts)? One script call (lua/acl-check.lua
 * asks Redis's ACL, nothing runs), sent with the boot's server check.
 *
 * Why at boot: a missing permission would otherwise show only when first used — a worker's
 * blocking read once it runs out of work, a command deep in a script's rarely taken branch, which
 * then stops after its earlier writes. A boot that fails naming `+blpop` is easier to act on.
 *
 * Which role: a process that runs a worker is checked against the worker's rule; one that serves
 * a read-only dashboard and runs no worker, against the dashboard's (the dashboard module says so
 * at init, see {@link servesReadOnlyDashboard}); any other, against the producer's. Permissions
 * Sluice works around when refused (INFO, CLIENT SETNAME, the function library) are not required.
 */
export class AclCheck {
  private dashboard = false;

  constructor(
    private readonly connections: RedisConnections,
    private readonly scripts: LuaScriptsProvider,
    private readonly keys: RedisKeys,
    private readonly options: AclOptions,
    private readonly runsWorker: () => boolean,
  ) {}

  /** The process serves a read-only dashboard: without a worker, it is checked against the dashboard's rule. */
  servesReadOnlyDashboard(): void {
    this.dashboard = true;
  }

  get role(): AclRole {
    return this.runsWorker() ? 'worker' : this.dashboard ? 'dashboard' : 'producer';
  }

  /**
   * Why the boot must fail, or undefined: the user holds every permission its role needs, or the
   * connection names no ACL user. Rejects with the call's own error when Redis did not answer
   * (a `RedisConnectionError`: checked again with the deferred boot).
   */
  async check(failFast: boolean): Promise<string | undefined> {
    const user = this.connections.command.client.options.username;
    if (!user || user === 'default') return undefined;
    const role = this.role;
    const cluster = this.options.cluster !== undefined;
    const needed = aclCommands(role, cluster).filter((permission) => !ACL_OPTIONAL.has(permission));
    const pattern = aclPattern({ prefix: this.options.prefix, namespace: this.options.namespace });
    let denied: string[];
    try {
      denied = await this.scripts
        .get()
        .run<string[]>('acl-check', [this.keys.limits], [this.keys.cancel, cluster ? 'spublish' : 'publish', ...needed], {
          idempotent: true,
          failFast,
        });
    } catch (error) {
      const refusal = error instanceof RedisCommandError ? (error.cause as Error | undefined)?.message : undefined;
      if (!refusal?.startsWith('NOPERM')) throw error;
      return `Redis ACL user "${user}" ${refusedCall(refusal, pattern)} (${refusal}); see the ${role} rule in ${ACL_DOCS}`;
    }
    if (denied.length === 0) return undefined;
    const grants = denied.map((entry) => grantOf(entry, pattern));
    return (
      `Redis ACL user "${user}" lacks permissions a Sluice ${role} needs: ${[...new Set(grants)].join(' ')}. ` +
      `Grant them (ACL SETUSER ${user} ${[...new Set(grants)].join(' ')}); the ${role} rule is in ${ACL_DOCS}`
    );
  }
}

/** What a refusal of the check's own call means: the scripts cannot run, or the namespace's keys are out of reach. */
function refusedCall(refusal: string, pattern: string): string {
  // FCALL refused falls back to EVALSHA (lua.scripts.ts): that being refused too is what arrives here.
  if (/'(evalsha|eval|fcall)' command/i.test(refusal)) return "may not run Sluice's scripts: grant +fcall and +function|load";
  if (/key/i.test(refusal)) return `may not access the namespace's keys: grant ~${pattern}`;
  if (/channel/i.test(refusal)) return `may not use the namespace's channels: grant &${pattern}`;
  return 'was refused a command Sluice needs';
}

/** An entry of lua/acl-check.lua's reply as the ACL rule that grants it. */
function grantOf(entry: string, pattern: string): string {
  return entry.startsWith('&') ? `&${pattern}` : `+${entry}`;
}
