import { Injectable } from '@nestjs/common';
import { LuaScripts } from './lua.scripts';
import { RedisConnections } from './redis.connections';
import { RedisKeys } from './redis.keys';

/** The scripts, read from disk the first time they are needed (no I/O at init). */
@Injectable()
export class LuaScriptsProvider {
  private scripts?: LuaScripts;

  constructor(
    private readonly connections: RedisConnections,
    private readonly keys: RedisKeys,
  ) {}

  get(): LuaScripts {
    return (this.scripts ??= new LuaScripts(this.connections.command, this.keys, this.connections.channels.sharded));
  }
}
