/**
 * `npm run sample`: runs the sample against REDIS_URL, or, when it is unset, against a throwaway
 * redis-server started on a free loopback port (and stopped afterwards). Exits with main's code.
 */
import { LocalRedis, startRedisServer } from '../test/support/redis-server';
import { main } from './main';

async function launch(): Promise<number> {
  let redis: LocalRedis | undefined;
  if (!process.env.REDIS_URL) {
    redis = await startRedisServer();
    process.env.REDIS_URL = redis.url;
    console.log(`Started redis-server on ${redis.url} (pid ${redis.pid}); set REDIS_URL to use your own`);
  }
  try {
    return await main();
  } finally {
    await redis?.stop();
  }
}

launch().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
