import Redis from 'ioredis';
import { SluiceSystem } from './bench/sluice.system';
import { startRedisServer } from './test/support/redis-server';
(async () => {
  const r = await startRedisServer(); const admin = new Redis(r.url); const N = 20000;
  const p = await new SluiceSystem().prepare((process.argv[2] ?? 'drain-c50') as any, N, r.url);
  await admin.config('RESETSTAT'); await p.timed();
  const info = await admin.info('commandstats');
  let tot = 0;
  for (const m of info.matchAll(/cmdstat_(\S+):calls=(\d+),usec=(\d+),usec_per_call=([\d.]+)/g)) { if (m[1] !== 'evalsha') tot += +m[3]; if (+m[2] > N / 100) console.log(`  ${m[1].padEnd(16)} calls/job ${(+m[2] / N).toFixed(2)} usec/job ${(+m[3] / N).toFixed(2)} per_call ${m[4]}`); }
  console.log('inner usec/job', (tot / N).toFixed(2));
  await p.cleanup(); await admin.quit(); await r.stop(); process.exit(0);
})();
