import { Command } from 'ioredis';

/** What a connection's (or its pipeline's) options say about building a command. */
interface BuildOptions {
  keyPrefix?: string;
  enableAutoPipelining?: boolean;
  showFriendlyErrorStack?: boolean;
}

/**
 * `FCALL fn numberOfKeys …argv` as an ioredis command that takes its arguments as they are, for
 * `sendCommand` of a connection or a pipeline; undefined where ioredis's own `fcall` must build
 * it. ioredis flattens every command's argument list with `Array.prototype.flat`, which on
 * Node 20 costs about 90 ns an argument: 2 µs for a script call's two dozen, most of what
 * building and sending it costs, and script calls' arguments are flat already. A user's instance
 * with a key prefix, auto-pipelining or friendly error stacks changes commands as they are built.
 */
export function flatFcall(
  options: BuildOptions,
  fn: string,
  numberOfKeys: number,
  argv: readonly (string | number)[],
): Command | undefined {
  if (options.keyPrefix || options.enableAutoPipelining || options.showFriendlyErrorStack) return undefined;
  return new FlatCommand('fcall', [fn, numberOfKeys, ...argv]);
}

class FlatCommand extends Command {
  constructor(name: string, args: (string | number)[]) {
    super(name, [], { replyEncoding: 'utf8' });
    this.args = args;
    // The base constructor stringified its own, empty, list: numbers become their text here.
    this.stringifyArguments();
  }
}
