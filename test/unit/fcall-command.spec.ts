import { Command } from 'ioredis';
import { flatFcall } from '../../lib/redis/fcall.command';

describe('flatFcall', () => {
  const argv = ['{sluice:ns}:run:a', '{sluice:ns}:leases', '{sluice:ns}:', 'a', 0, 30_000, '', 'ünïcode'];

  it('writes exactly the bytes ioredis would for the same FCALL', () => {
    const flat = flatFcall({}, 'sluice_x_enqueue', 2, argv)!;
    const ioredis = new Command('fcall', ['sluice_x_enqueue', 2, ...argv], { replyEncoding: 'utf8' });
    expect(flat.toWritable(undefined as never)).toEqual(ioredis.toWritable(undefined as never));
    expect(flat.args).toEqual(['sluice_x_enqueue', '2', ...argv.map(String)]);
  });

  it("leaves a command to ioredis's own fcall where the connection changes commands as they are built", () => {
    for (const options of [{ keyPrefix: 'x:' }, { enableAutoPipelining: true }, { showFriendlyErrorStack: true }])
      expect(flatFcall(options, 'f', 0, [])).toBeUndefined();
  });

  it('does not keep the caller’s array (the call may be sent again with other arguments)', () => {
    const args = ['k', 1];
    const command = flatFcall({}, 'f', 1, args)!;
    args[0] = 'changed';
    expect(command.args[2]).toBe('k');
  });
});
