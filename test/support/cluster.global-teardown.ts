import chaosGlobalTeardown from './chaos.global-teardown';
import type { LocalCluster } from './redis-cluster';

/** Stops the shared cluster (see cluster.global-setup.ts), then does the fault suite's teardown: leftovers killed, shared redis-server stopped. */
export default async function clusterGlobalTeardown(): Promise<void> {
  const cluster = (globalThis as { __sluiceCluster__?: LocalCluster }).__sluiceCluster__;
  try {
    await cluster?.stop();
  } finally {
    await chaosGlobalTeardown();
  }
}
