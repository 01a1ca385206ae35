import { createHash } from 'node:crypto';
import type { WorkflowDefinition } from '../discovery/workflow.registry';
import { buildScheduleSpec, DECLARED_SCHEDULE_OPTIONS, ScheduleSpec } from '../workflow/schedule.check';
import { checkInput } from '../workflow/schema.validate';
import { timingText } from '../workflow/schedule.timing';
import type { ScheduleChange } from '../redis/commands/schedule-write.command';
import type { ScheduleStore } from './schedule.store';

/**
 * The schedules a worker's code declares (`@Workflow({ schedules })`), checked against the
 * module options (the input's size) before anything is written.
 * @throws the typed input errors of {@link buildScheduleSpec}
 */
export function declaredScheduleSpecs(workflows: WorkflowDefinition[], maxPayloadBytes: number): ScheduleSpec[] {
  return workflows.flatMap((workflow) =>
    workflow.schedules.map((schedule, index) =>
      buildScheduleSpec(
        schedule.id,
        workflow,
        schedule,
        `@Workflow('${workflow.name}') schedules[${index}]`,
        maxPayloadBytes,
        DECLARED_SCHEDULE_OPTIONS,
      ),
    ),
  );
}

/**
 * The declared schedules' inputs against their workflow's input schema, before anything is
 * written: a promise only if some schema is async.
 * @throws InputValidationError naming the schedule (`@Workflow('report') schedules[1].input`)
 */
export function checkDeclaredInputs(workflows: WorkflowDefinition[]): Promise<unknown> | undefined {
  let pending: Promise<unknown>[] | undefined;
  for (const workflow of workflows) {
    if (workflow.input === undefined) continue;
    workflow.schedules.forEach((schedule, index) => {
      const input = schedule.input === undefined ? null : schedule.input;
      const checking = checkInput(workflow, input, `@Workflow('${workflow.name}') schedules[${index}].input`);
      if (checking) (pending ??= []).push(checking);
    });
  }
  return pending && Promise.all(pending);
}

/**
 * One workflow's declaration as a whole: the schedules its code declares (ids and definitions),
 * so that two versions of the code declaring the same set share it. The namespace numbers
 * declarations in the order they first reach it; a bootstrap only removes schedules a declaration
 * numbered before its own declared (lua/schedule-write.lua).
 */
export function declarationFingerprint(specs: ScheduleSpec[]): string {
  const entries = specs.map((spec) => [spec.id, spec.fingerprint]).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash('sha1').update(JSON.stringify(entries)).digest('hex');
}

/**
 * Writes the declared schedules at bootstrap — the latest bootstrap wins — and removes those the
 * code of these workflows no longer declares, unless a newer declaration of their workflow
 * declares them (an older pod booting during a rolling deploy); logs each change.
 * @throws ScheduleConflictError if a declared id belongs to a runtime schedule of another workflow (nothing written)
 */
export async function declareSchedules(
  store: ScheduleStore,
  specs: ScheduleSpec[],
  workflows: string[],
  logger: { log(message: string): void },
): Promise<void> {
  const byId = new Map(specs.map((spec) => [spec.id, spec]));
  const declarations = workflows.map((workflow) => ({
    workflow,
    fingerprint: declarationFingerprint(specs.filter((spec) => spec.workflow === workflow)),
  }));
  for (const { id, change } of await store.declare(specs, declarations)) {
    if (change === 'unchanged') continue;
    const spec = byId.get(id);
    const what = spec ? ` (workflow ${spec.workflow}, ${timingText(spec.pattern)})` : '';
    logger.log(`Schedule "${id}" ${CHANGES[change]}${what}`);
  }
}

const CHANGES: Record<Exclude<ScheduleChange, 'unchanged'>, string> = {
  added: 'added',
  changed: 'changed',
  removed: 'removed: the code no longer declares it',
  kept: 'kept as changed at runtime (the code still declares the definition it replaced)',
  newer: 'left alone: this code does not declare it, but a newer version of the code does (QueueClient.unschedule removes it)',
};
