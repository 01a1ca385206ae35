import Redis from 'ioredis';
import { SluiceSystem } from './bench/sluice.system';
import { BullmqSystem } from './bench/bullmq.system';
import { startRedisServer } from './test/support/redis-server';
const cpu = async (a: Redis) => { const i = await a.info('cpu'); return (+i.match(/used_cpu_user:(\S+)/)![1] + +i.match(/used_cpu_sys:(\S+)/)![1]) * 1e6; };
(async () => {
  const r = await startRedisServer(); const admin = new Redis(r.url);
  const sc = (process.argv[2] ?? 'drain-c50') as any; const N = 20000;
  for (const sys of process.argv[3] === 'both' ? [new SluiceSystem(), new BullmqSystem()] : [new SluiceSystem()]) for (let i = 0; i < 3; i++) {
    await admin.flushall();
    const p = await sys.prepare(sc, N, r.url);
    const c0 = process.cpuUsage(); const r0 = await cpu(admin);
    const t = performance.now(); await p.timed(); const ms = performance.now() - t;
    const c1 = process.cpuUsage(c0); const r1 = await cpu(admin);
    console.log(sys.name, sc, Math.round(N * 1000 / ms), 'ops/s', 'node µs/job', ((c1.user + c1.system) / N).toFixed(1), 'redis µs/job', ((r1 - r0) / N).toFixed(1)); await p.cleanup();
  }
  await admin.quit(); await r.stop(); process.exit(0);
})();
