import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

/**
 * A V8 CPU profile and a sampled allocation profile of the timed part of one run only
 * (`--cpu-profile <dir>`): `node --cpu-prof` profiles the whole process, pre-fill and correctness
 * count included, which hides what the timed part spends its time on. Writes
 * `<dir>/<scenario>-<system>-<repeat>.cpuprofile` and `.heapprofile` (open them in Chrome
 * DevTools: Performance, and Memory's allocation sampling).
 */
export async function profiled<T>(dir: string | undefined, name: string, timed: () => Promise<T>): Promise<T> {
  if (!dir) return timed();
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))));
  await post('Profiler.enable');
  await post('HeapProfiler.enable');
  await post('HeapProfiler.startSampling', {
    samplingInterval: 16_384,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await post('Profiler.start');
  try {
    return await timed();
  } finally {
    const { profile } = (await post('Profiler.stop')) as { profile: unknown };
    const { profile: heap } = (await post('HeapProfiler.stopSampling')) as { profile: unknown };
    writeFileSync(join(dir, `${name}.cpuprofile`), JSON.stringify(profile));
    writeFileSync(join(dir, `${name}.heapprofile`), JSON.stringify(heap));
    session.disconnect();
  }
}
