import type { BenchSystem } from './bench.types';
import { BeeQueueSystem } from './beequeue.system';
import { BullmqSystem } from './bullmq.system';
import { DbosSystem } from './dbos.system';
import { FloorSystem } from './floor.system';
import { GroupmqSystem } from './groupmq.system';
import { SluiceSystem } from './sluice.system';

/** Every system the bench compares, in the order of its table. */
export const allSystems = (): BenchSystem[] => [
  new SluiceSystem(),
  new BullmqSystem(),
  new BeeQueueSystem(),
  new GroupmqSystem(),
  new DbosSystem(),
  new FloorSystem(),
];

export function systemNamed(name: string): BenchSystem {
  const system = allSystems().find((s) => s.name === name);
  if (!system) throw new Error(`unknown bench system ${name}`);
  return system;
}
