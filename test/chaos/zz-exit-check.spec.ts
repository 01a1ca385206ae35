import { RedisProcess } from '../support/redis-process';
it('leaks a server on purpose', async () => {
  const server = await RedisProcess.start();
  require('fs').writeFileSync('/tmp/exit-check/pid', String(server.pid));
});
