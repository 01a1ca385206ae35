import type Redis from 'ioredis';

/**
 * The server's command counters from INFO commandstats: `commands`, every command Redis executed
 * (those run inside scripts included); `scripts`, the script calls (FCALL, or EVAL and EVALSHA). Both include
 * nothing of this read's own but its INFO call.
 */
export async function commandCounts(redis: Redis): Promise<{ commands: number; scripts: number }> {
  const commandstats = await redis.info('commandstats');
  let commands = 0;
  let scripts = 0;
  for (const [, name, calls] of commandstats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    commands += Number(calls);
    if (name === 'eval' || name === 'evalsha' || name === 'fcall') scripts += Number(calls);
  }
  return { commands, scripts };
}
