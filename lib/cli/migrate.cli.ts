#!/usr/bin/env node
/**
 * `nest-sluice migrate`: brings a namespace to this version's key layout from a deploy pipeline
 * (with the module option `migrate: false`). The same {@link LayoutMigrator} as
 * `QueueClient.migrate()`, without Nest: one Redis connection with Sluice's bounds.
 *
 * Exit codes: 0 done (or nothing to do), 1 the migration failed (the message says why; running
 * it again is safe), 2 bad arguments.
 */
import { LayoutMigrator, MigrationLogger } from '../migration/layout.migrator';
import { resolveQueueOptions } from '../interfaces/queue.options';
import { LuaScripts } from '../redis/lua.scripts';
import { RedisEndpoint } from '../redis/redis.factory';
import { RedisKeys } from '../redis/redis.keys';
import { toMilliseconds } from '../util/duration';

const USAGE = `Usage: nest-sluice migrate (--url <redis://[user:password@]host:port[/db]> | --cluster <host:port,…>) --namespace <namespace> [options]

Moves the namespace's Redis data to the key layout of this version of nest-sluice, once, under
a lock (other processes migrating at the same time wait for it). Safe to run again. A namespace
that holds data goes to layout 3 (shared with older releases) unless --to 4 asks for layout 4
(lean run records): ask for it only once no older process uses the namespace.

Options:
  --url <url>              Redis URL (redis:// or rediss://)
  --cluster <host:port,…>  seed nodes of a Redis Cluster, instead of --url (no auth, no TLS:
                           for those, run QueueClient.migrate() from an app)
  --namespace <name>       the QueueModule namespace
  --prefix <prefix>        the QueueModule prefix (default: sluice)
  --to <layout>            3 or 4 (default: 3 for a namespace with data, 4 for a new one)
  --wait <duration>        longest wait for another process's migration (default: 60s)
  --redis-timeout <dur.>   bound of each Redis call (default: 10s)
  --json                   print the result as JSON: {"namespace","from","to","migrated"}
  -h, --help               this text`;

/** Where the bin writes: the result to `out`, progress and errors to `err`. */
export interface CliOutput {
  out(line: string): void;
  err(line: string): void;
}

class UsageError extends Error {}

const VALUE_FLAGS = new Set(['url', 'cluster', 'namespace', 'prefix', 'to', 'wait', 'redis-timeout']);

function parseArgs(argv: string[]): { help: boolean; json: boolean; values: Map<string, string> } {
  const values = new Map<string, string>();
  let help = false;
  let json = false;
  const [command, ...rest] = argv;
  if (command === '-h' || command === '--help' || command === undefined) return { help: true, json, values };
  if (command !== 'migrate') throw new UsageError(`unknown command "${command}" (the only command is "migrate")`);
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (arg === '-h' || arg === '--help') help = true;
    else if (arg === '--json') json = true;
    else {
      const match = /^--([a-z-]+)(?:=(.*))?$/s.exec(arg);
      if (!match || !VALUE_FLAGS.has(match[1])) throw new UsageError(`unknown argument "${arg}"`);
      const value = match[2] ?? rest[++i];
      if (value === undefined || value === '') throw new UsageError(`--${match[1]} needs a value`);
      values.set(match[1], value);
    }
  }
  return { help, json, values };
}

function seedOf(address: string): { host: string; port: number } {
  const match = /^(.+):(\d+)$/.exec(address.trim());
  if (!match) throw new UsageError(`--cluster: "${address}" is not host:port`);
  return { host: match[1], port: Number(match[2]) };
}

/** Runs the bin with `argv` (without `node` and the script); resolves the exit code. */
export async function runMigrateCli(argv: string[], output: CliOutput): Promise<number> {
  let parsed: ReturnType<typeof parseArgs>;
  let options: ReturnType<typeof resolveQueueOptions>;
  let waitTimeoutMs: number;
  let to: number | undefined;
  try {
    parsed = parseArgs(argv);
    if (parsed.help) {
      output.out(USAGE);
      return 0;
    }
    const url = parsed.values.get('url');
    const cluster = parsed.values.get('cluster');
    const namespace = parsed.values.get('namespace');
    if (!url === !cluster) throw new UsageError('give one of --url and --cluster');
    if (!namespace) throw new UsageError('--namespace is required');
    const connection = url ? { url } : { cluster: cluster!.split(',').map(seedOf) };
    options = resolveQueueOptions({
      connection,
      namespace,
      prefix: parsed.values.get('prefix'),
      redisTimeoutMs: parsed.values.get('redis-timeout') ?? 10_000,
    });
    waitTimeoutMs = toMilliseconds(parsed.values.get('wait') ?? 60_000, '--wait');
    const layout = parsed.values.get('to');
    if (layout !== undefined && !/^[34]$/.test(layout))
      throw new UsageError(`--to: "${layout}" is not a layout this version migrates to (3 or 4)`);
    to = layout === undefined ? undefined : Number(layout);
  } catch (error) {
    output.err(`nest-sluice: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }

  const logger: MigrationLogger = { log: (line) => output.err(line), warn: (line) => output.err(`warning: ${line}`) };
  const keys = new RedisKeys(options.prefix, options.namespace);
  const endpoint = new RedisEndpoint(options);
  const link = endpoint.link('command', logger);
  try {
    const migrator = new LayoutMigrator(new LuaScripts(link, keys, endpoint.channels.sharded), link, keys, logger, {
      waitTimeoutMs,
      lockTtlMs: Math.max(15_000, 3 * options.redisTimeoutMs),
    });
    // failFast: a refused connection is reported at once rather than after --redis-timeout.
    const result = await migrator.migrate({ failFast: true, to });
    if (parsed.json) output.out(JSON.stringify({ namespace: keys.base, ...result }));
    else if (result.migrated) output.out(`nest-sluice: migrated ${keys.base} from key layout ${result.from} to ${result.to}`);
    else output.out(`nest-sluice: ${keys.base} is at key layout ${result.to}; nothing to migrate`);
    return 0;
  } catch (error) {
    const { name, message } = error as Error;
    output.err(`nest-sluice: migrating ${keys.base} failed: ${name}: ${message}`);
    return 1;
  } finally {
    await link.close();
  }
}

if (require.main === module) {
  const output: CliOutput = { out: (line) => process.stdout.write(`${line}\n`), err: (line) => process.stderr.write(`${line}\n`) };
  void runMigrateCli(process.argv.slice(2), output).then((code) => (process.exitCode = code));
}
