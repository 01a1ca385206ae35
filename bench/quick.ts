import Redis from 'ioredis';
import { SluiceSystem } from './sluice.system';
import type { ScenarioName } from './bench.types';

// Sluice alone: ops/s, worker-process CPU µs/job and Redis CPU µs/job for one scenario.
async function main() {
  const [scenario, jobs, url] = [process.argv[2] as ScenarioName, Number(process.argv[3]), process.argv[4]];
  const admin = new Redis(url);
  const cpuOf = async () => { const i = await admin.info('cpu'); return (Number(/used_cpu_user:([\d.]+)/.exec(i)![1]) + Number(/used_cpu_sys:([\d.]+)/.exec(i)![1])) * 1e6; };
  await admin.flushall();
  const prepared = await new SluiceSystem().prepare(scenario, jobs, url);
  await admin.config('RESETSTAT'); const r0 = await cpuOf(); const c0 = process.cpuUsage(); const t0 = performance.now();
  const { latency } = await prepared.timed();
  const ms = performance.now() - t0; const c1 = process.cpuUsage(c0); const r1 = await cpuOf();
  const cs = await admin.info('commandstats'); const ev = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(cs)!; const tot = [...cs.matchAll(/calls=(\d+),usec=(\d+)/g)].reduce((a, m) => a + Number(m[2]), 0);
  console.log(JSON.stringify({ evalPerJob: +(Number(ev[1]) / jobs).toFixed(3), usPerEval: +(Number(ev[2]) / Number(ev[1])).toFixed(1), cmdUsPerJob: +(tot / jobs).toFixed(1), ops: Math.round(jobs * 1000 / ms), jsUs: +((c1.user + c1.system) / jobs).toFixed(1), redisUs: +((r1 - r0) / jobs).toFixed(1), mean: latency?.meanMs }));
  await prepared.cleanup(); await admin.quit();
}
main().then(() => process.exit(0));
