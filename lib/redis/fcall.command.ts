import { Command } from 'ioredis';

/** A connection or one of its pipelines (ioredis's Pipeline builds commands with its connection's options). */
interface FcallTarget {
  options: { keyPrefix?: string; enableAutoPipelining?: boolean; showFriendlyErrorStack?: boolean };
  sendCommand(command: Command): unknown;
  fcall(fn: string, numberOfKeys: number, ...args: (string | number)[]): unknown;
}

/**
 * Sends (or queues, on a pipeline) `FCALL fn numberOfKeys …argv` as an ioredis command that takes
 * its arguments as they are. On a connection it resolves the reply; on a pipeline the reply comes
 * from its exec, and what this returns is not to be waited on. ioredis
 * flattens every command's argument list with `Array.prototype.flat`, which on Node 20 costs
 * about 90 ns an argument: 2 µs for a script call's two dozen, most of what building and sending
 * it costs, and script calls' arguments are flat already. A user's instance with a key prefix,
 * auto-pipelining or friendly error stacks changes commands as they are built: ioredis's own
 * `fcall` builds those.
 */
export function sendFcall(target: FcallTarget, fn: string, numberOfKeys: number, argv: readonly (string | number)[]): Promise<unknown> {
  const { keyPrefix, enableAutoPipelining, showFriendlyErrorStack } = target.options;
  if (keyPrefix || enableAutoPipelining || showFriendlyErrorStack) return target.fcall(fn, numberOfKeys, ...argv) as Promise<unknown>;
  const command = new FlatCommand('fcall', [fn, numberOfKeys, ...argv]);
  target.sendCommand(command);
  return command.promise;
}

class FlatCommand extends Command {
  constructor(name: string, args: (string | number)[]) {
    super(name, [], { replyEncoding: 'utf8' });
    this.args = args;
    // The base constructor stringified its own, empty, list: numbers become their text here.
    this.stringifyArguments();
  }
}
