import chaosGlobalSetup from './chaos.global-setup';
import { startRedisCluster } from './redis-cluster';

/**
 * Global setup of the cluster suite (jest.cluster.config.js): what the fault suite's setup does
 * (the shared redis-server in REDIS_URL, the SLUICE_CHAOS_RUN_DIR registry of started servers, so
 * the teardown kills what a failed test leaves running), plus one shared 3-master cluster whose
 * seeds go to SLUICE_TEST_CLUSTER (JSON `[{ host, port }, …]`), unless that is set already.
 * test/support/app.ts connects there when it is set.
 */
export default async function clusterGlobalSetup(): Promise<void> {
  await chaosGlobalSetup();
  if (process.env.SLUICE_TEST_CLUSTER) return;
  // No replicas: nothing fails over on the shared cluster, and a longer node timeout keeps a
  // node busy under CPU load from being flagged failed (with no replica that takes slots down).
  const cluster = await startRedisCluster({ masters: 3, nodeTimeoutMs: 5_000 });
  process.env.SLUICE_TEST_CLUSTER = JSON.stringify(cluster.seeds());
  (globalThis as { __sluiceCluster__?: unknown }).__sluiceCluster__ = cluster;
}
