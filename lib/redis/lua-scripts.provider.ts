import { Inject, Injectable } from '@nestjs/common';
import { RESOLVED_QUEUE_OPTIONS } from '../queue.constants';
import type { ResolvedQueueOptions } from '../queue.options';
import { LuaScripts } from './lua.scripts';
import { RedisConnections } from './redis.connections';
import { RedisKeys } from './redis.keys';

/** The scripts, read from disk the first time they are needed (no I/O at init). */
@Injectable()
export class LuaScriptsProvider {
  private scripts?: LuaScripts;

  constructor(
    private readonly connections: RedisConnections,
    @Inject(RESOLVED_QUEUE_OPTIONS) private readonly options: ResolvedQueueOptions,
  ) {}

  get(): LuaScripts {
    return (this.scripts ??= new LuaScripts(this.connections.command, new RedisKeys(this.options.prefix, this.options.namespace), this.connections.channels.sharded));
  }
}
