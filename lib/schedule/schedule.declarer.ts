import type { WorkflowDefinition } from '../discovery/workflow.registry';
import { buildScheduleSpec, ScheduleSpec } from './schedule.options';
import type { ScheduleStore } from './schedule.store';

/**
 * The schedules a worker's code declares (`@Workflow({ schedules })`), checked against the
 * module options (the input's size) before anything is written.
 * @throws the typed input errors of {@link buildScheduleSpec}
 */
export function declaredScheduleSpecs(workflows: WorkflowDefinition[], maxPayloadBytes: number): ScheduleSpec[] {
  return workflows.flatMap((workflow) =>
    workflow.schedules.map((schedule, index) => buildScheduleSpec(schedule.id, workflow, schedule, `@Workflow('${workflow.name}') schedules[${index}]`, maxPayloadBytes)),
  );
}

/**
 * Writes the declared schedules at bootstrap — the latest bootstrap wins — and removes those the
 * code of these workflows no longer declares; logs each change.
 * @throws ScheduleConflictError if a declared id belongs to a runtime schedule of another workflow (nothing written)
 */
export async function declareSchedules(
  store: ScheduleStore,
  specs: ScheduleSpec[],
  workflows: string[],
  logger: { log(message: string): void },
): Promise<void> {
  const byId = new Map(specs.map((spec) => [spec.id, spec]));
  for (const { id, change } of await store.declare(specs, workflows)) {
    if (change === 'unchanged') continue;
    const spec = byId.get(id);
    const what = spec ? ` (workflow ${spec.workflow}, cron "${spec.pattern.cron}"${spec.pattern.tz ? ` in ${spec.pattern.tz}` : ''})` : '';
    logger.log(`Schedule "${id}" ${change === 'removed' ? 'removed: the code no longer declares it' : change}${what}`);
  }
}
