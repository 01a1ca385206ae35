import { Command } from 'ioredis';
import { sendFcall } from '../../lib/redis/fcall.command';

/** What sendFcall hands a connection: the command it would write, or the call it left to ioredis. */
function capture(options: Record<string, unknown> = {}) {
  const sent: Command[] = [];
  const viaIoredis: unknown[][] = [];
  const target = {
    options,
    sendCommand: (command: Command) => sent.push(command),
    fcall: (...args: unknown[]) => (viaIoredis.push(args), Promise.resolve('via ioredis')),
  };
  return { target, sent, viaIoredis };
}

describe('sendFcall', () => {
  const argv = ['{sluice:ns}:run:a', '{sluice:ns}:leases', '{sluice:ns}:', 'a', 0, 30_000, '', 'ünïcode'];

  it('writes exactly the bytes ioredis would for the same FCALL', () => {
    const { target, sent } = capture();
    void sendFcall(target, 'sluice_x_enqueue', 2, argv);
    const ioredis = new Command('fcall', ['sluice_x_enqueue', 2, ...argv], { replyEncoding: 'utf8' });
    expect(sent[0].toWritable(undefined as never)).toEqual(ioredis.toWritable(undefined as never));
    expect(sent[0].args).toEqual(['sluice_x_enqueue', '2', ...argv.map(String)]);
  });

  it("leaves a command to ioredis's own fcall where the connection changes commands as they are built", async () => {
    for (const options of [{ keyPrefix: 'x:' }, { enableAutoPipelining: true }, { showFriendlyErrorStack: true }]) {
      const { target, sent, viaIoredis } = capture(options);
      await expect(sendFcall(target, 'f', 0, ['a'])).resolves.toBe('via ioredis');
      expect(sent).toEqual([]);
      expect(viaIoredis).toEqual([['f', 0, 'a']]);
    }
  });

  it('does not keep the caller’s array (the call may be sent again with other arguments)', () => {
    const { target, sent } = capture();
    const args = ['k', 1];
    void sendFcall(target, 'f', 1, args);
    args[0] = 'changed';
    expect(sent[0].args[2]).toBe('k');
  });
});
