import { Logger } from '@nestjs/common';
import type { WorkflowRegistry } from '../discovery/workflow.registry';
import { EVERY_GROUP, limitField, rateFields } from '../interfaces/limits';
import type { ResolvedQueueOptions } from '../interfaces/queue.options';
import { activateGroups } from '../redis/commands/activate-groups.command';
import { declareTriggers } from '../redis/commands/declare-triggers.command';
import { type CapDeclaration, declareLimits } from '../redis/commands/declare-limits.command';
import type { DeclarationCheck } from '../redis/commands/reserve.command';
import type { LuaScriptsProvider } from '../redis/lua-scripts.provider';
import type { ScriptRunner } from '../redis/lua.scripts';
import type { RedisConnections } from '../redis/redis.connections';
import type { RedisKeys } from '../redis/redis.keys';
import { checkDeclaredInputs, declarationFingerprint, declaredScheduleSpecs, declareSchedules } from '../schedule/schedule.declarer';
import { ScheduleStore } from '../schedule/schedule.store';
import { declareRateLimits, logDeclaration } from './rate-limits.declarer';

/** What a worker's declarations are made from (see WorkerOrchestrator). */
export interface DeclarationParts {
  options: ResolvedQueueOptions;
  registry: WorkflowRegistry;
  connections: RedisConnections;
  scripts: LuaScriptsProvider;
  keys: RedisKeys;
}

/**
 * What a worker's code declares, written at its bootstrap: the latest bootstrap wins among
 * declarations (see WorkerOrchestrator, which sends them with its first write).
 */
export class WorkerDeclarations {
  private readonly logger = new Logger('Sluice');

  constructor(private readonly parts: DeclarationParts) {}

  /**
   * The bootstrap's writes: caps, rate limits, schedules and event subscriptions (all checked before the first write).
   * They touch separate fields and keys, so their calls go out together over the command
   * connection, in that order and in one write, and are waited for together: one round trip, not
   * one each.
   */
  async declare(failFast: boolean, scripts: ScriptRunner = this.parts.scripts.get()): Promise<void> {
    const workflows = this.parts.registry.all();
    const schedules = declaredScheduleSpecs(workflows, this.parts.options.maxPayloadBytes);
    const checking = checkDeclaredInputs(workflows);
    if (checking) await checking;
    const store = new ScheduleStore(scripts, this.parts.connections.command, this.parts.keys);
    await this.parts.connections.command.together(() =>
      Promise.all([
        this.declareLimits(failFast, scripts),
        declareRateLimits(scripts, this.parts.keys, workflows, this.logger),
        declareSchedules(
          store,
          schedules,
          workflows.map((wf) => wf.name),
          this.logger,
        ),
        this.declareTriggers(failFast, scripts),
      ]),
    );
  }

  /**
   * What the boot's first reserve checks instead of sending the declarations, when the code
   * declares nothing — no namespace cap, and per workflow no cap, rate limit, schedule or retention
   * setting, subscription: the five calls would then only clear values and register the workflows, which Redis
   * holds already on most boots (see lua/reserve.lua alreadyDeclared). Undefined when the code
   * declares something: its declarations are sent.
   */
  check(): DeclarationCheck | undefined {
    const workflows = this.parts.registry.all();
    const caps = this.caps();
    const declaresSomething =
      caps.some((cap) => cap.limit !== '') ||
      workflows.some((wf) => wf.rateLimit || wf.groupRateLimit || wf.schedules.length > 0 || wf.on.length > 0);
    if (declaresSomething) return undefined;
    return {
      fingerprint: declarationFingerprint([]),
      // A declaration of no rate limit clears the workflow's and every group's, and a review under way (lua/set-control.lua).
      fields: [...caps.map((cap) => cap.field), ...workflows.flatMap((wf) => [...rateFields(wf.name), `wf:${wf.name}:rate-review`])],
    };
  }

  /**
   * Registers this worker's workflows and writes the caps its code declares — namespace,
   * workflow, every group's default — so the latest bootstrap wins among declarations, and says
   * so. A cap an operator set at runtime (`setLimits`) stays while the code still declares what it
   * overrode, and gives way to a changed declaration (lua/includes/origins.lua). Per-group
   * overrides are runtime settings and are left alone.
   */
  private async declareLimits(failFast: boolean, scripts: ScriptRunner): Promise<void> {
    const names = this.parts.registry.all().map((wf) => wf.name);
    const changed = await declareLimits(scripts, this.parts.keys, names, this.caps(), { failFast });
    const groupDefaults = new Map(names.map((name) => [limitField({ workflow: name, group: EVERY_GROUP }), name]));
    for (const { field, previous, next, outcome, declared } of changed) {
      logDeclaration(this.logger, `cap ${field}`, previous || 'none', next || 'none', outcome, declared || 'none');
      // A raised or removed default of every group: the groups it held back rejoin, in batches.
      const raised = previous !== next && (next === '' || (previous !== '' && Number(next) > Number(previous)));
      const workflow = groupDefaults.get(field);
      if (workflow !== undefined && raised) await activateGroups(this.parts.scripts.get(), this.parts.keys, workflow);
    }
  }

  /**
   * Subscribes this worker's workflows to the events their code names, and unsubscribes them from
   * the others (every workflow is sent, so a dropped `on` leaves nothing behind), and says what
   * changed. Runs already started by an event are left alone.
   */
  private async declareTriggers(failFast: boolean, scripts: ScriptRunner): Promise<void> {
    const declarations = this.parts.registry.all().map((wf) => ({ workflow: wf.name, attempts: wf.attempts, events: wf.on }));
    for (const { workflow, added, removed } of await declareTriggers(scripts, this.parts.keys, declarations, { failFast })) {
      const parts = [
        added.length > 0 && `subscribed to ${added.join(', ')}`,
        removed.length > 0 && `unsubscribed from ${removed.join(', ')}`,
      ];
      this.logger.log(`Workflow ${workflow}: ${parts.filter(Boolean).join('; ')} (event triggers, fleet-wide)`);
    }
  }

  /** The fleet-wide values the code declares in the limits hash ('' where it declares none). */
  private caps(): CapDeclaration[] {
    const cap = (limit?: number) => (limit === undefined ? '' : String(limit));
    return [
      { field: 'ns', limit: cap(this.parts.options.concurrency), workflow: '', group: '' },
      ...this.parts.registry.all().flatMap((wf) => [
        { field: limitField({ workflow: wf.name }), limit: cap(wf.concurrency), workflow: wf.name, group: '' },
        {
          field: limitField({ workflow: wf.name, group: EVERY_GROUP }),
          limit: cap(wf.groupConcurrency),
          workflow: wf.name,
          group: EVERY_GROUP,
        },
        // Retention by count, read by countFinished (lua/includes/finish.lua) when runs finish.
        { field: `wf:${wf.name}:keep:completed`, limit: cap(wf.keep?.completed), workflow: wf.name, group: '' },
        { field: `wf:${wf.name}:keep:failed`, limit: cap(wf.keep?.failed), workflow: wf.name, group: '' },
        // Whether complete indexes the workflow's runs (lua/includes/finish.lua countFinished).
        { field: `wf:${wf.name}:index-completed`, limit: wf.indexCompleted ? '1' : '', workflow: wf.name, group: '' },
      ]),
    ];
  }
}
