import { Injectable, Logger } from '@nestjs/common';
import { QueueClient } from '../lib';
import { latency } from './inventory.service';
import { STOCK_REPORT_SCHEDULE, StockReport, StockReportWorkflow } from './stock-report.workflow';
import { DemoReport } from './demo.report';

const WAIT = { timeoutMs: 15_000 };
const BERLIN = 'Europe/Berlin';

/**
 * Cron schedules: the stock report declared on `@Workflow` (it has been firing in the
 * background since bootstrap), and one made at runtime with `client.schedule`. Returns the
 * failed checks, like OrderDemo.
 */
@Injectable()
export class ScheduleDemo {
  private readonly logger = new Logger('Demo');
  private readonly report = new DemoReport(this.logger);

  constructor(private readonly client: QueueClient) {}

  async runAll(): Promise<string[]> {
    await this.declaredSchedule();
    await this.runtimeSchedule();
    await this.intervalSchedule();
    return this.report.problems;
  }

  /** 8. The schedule on StockReportWorkflow: two fires, their runs, its plan, then a pause. */
  private async declaredSchedule(): Promise<void> {
    this.report.section('8. cron schedule declared in code: a stock report every 2 s ("*/2 * * * * *")');
    const info = await this.untilFired(STOCK_REPORT_SCHEDULE, 2);
    this.logger.log(
      `getSchedule → source ${info.source}, fired ${info.fired}, skipped ${info.skipped}, ` +
        `last fire ${utc(info.lastFireAt)} → run ${info.lastRunId}`,
    );
    this.logger.log(`next fire times: ${info.upcoming.map(utc).join(', ')}`);
    this.report.check(
      info.source === 'code' && info.workflow === 'inventory.stock-report',
      'the schedule was written from the @Workflow declaration',
    );
    const gaps = info.upcoming.slice(1).map((d, i) => d.getTime() - info.upcoming[i].getTime());
    this.report.check(info.upcoming.length === 5 && gaps.every((gap) => gap === 2_000), 'the next fire times are 2 s apart');
    this.report.check(
      info.lastRunId === `${STOCK_REPORT_SCHEDULE}@${info.lastFireAt?.getTime()}`,
      'the run id is <schedule id>@<occurrence ms>',
    );

    const report = await this.client.wait<StockReport>(info.lastRunId!, WAIT);
    this.logger.log(`client.wait(${info.lastRunId}) → ${JSON.stringify(report)}`);
    this.report.check((await this.client.get(info.lastRunId!))?.state === 'completed', "the schedule's latest run completed");

    const paused = await this.client.pauseSchedule(STOCK_REPORT_SCHEDULE);
    this.logger.log(
      `pauseSchedule → paused ${paused.paused}, nextFireAt ${utc(paused.nextFireAt)}, upcoming [${paused.upcoming.map(utc).join(', ')}], fired ${paused.fired}`,
    );
    this.report.check(
      paused.paused && paused.nextFireAt === null && paused.upcoming.length === 0,
      'the paused schedule has no next fire time',
    );

    // Paused, `fired` is final; with overlap: false each fire waited for the previous run to end.
    if (paused.lastRunId) await this.client.wait(paused.lastRunId, WAIT);
    const stats = (await this.client.stats({ workflow: StockReportWorkflow })).workflows['inventory.stock-report'];
    this.logger.log(`client.stats → completed ${stats.completed}, failed ${stats.failed} (the schedule fired ${paused.fired})`);
    this.report.check(stats.completed === paused.fired && stats.failed === 0, `all ${paused.fired} runs the schedule started completed`);

    // The occurrence after the last fire would have been due within 2 s: let it pass.
    const missed = (paused.lastFireAt?.getTime() ?? Date.now()) + 2_000;
    await latency(Math.max(0, missed + 500 - Date.now()));
    const after = await this.client.getSchedule(STOCK_REPORT_SCHEDULE);
    const missedRun = await this.client.get(`${STOCK_REPORT_SCHEDULE}@${missed}`);
    this.logger.log(
      `after ${utc(new Date(missed))} passed: fired ${after?.fired}, run ${STOCK_REPORT_SCHEDULE}@${missed} ${missedRun ? 'exists' : 'does not exist'}`,
    );
    this.report.check(after?.paused === true && after.fired === paused.fired && missedRun === null, 'the paused schedule did not fire');
  }

  /** 9. A schedule made at runtime, read in a time zone, then removed. */
  private async runtimeSchedule(): Promise<void> {
    this.report.section(`9. runtime schedule: a stock digest at 09:00 on weekdays in ${BERLIN}`);
    const id = 'stock-digest.berlin';
    const created = await this.client.schedule(id, StockReportWorkflow, {
      cron: '0 9 * * MON-FRI',
      tz: BERLIN,
      input: { reorderBelow: 900 },
    });
    this.logger.log(`schedule → source ${created.source}, cron "${created.cron}" in ${created.tz}, input ${JSON.stringify(created.input)}`);
    this.logger.log(`next fire times: ${created.upcoming.map((d) => `${berlin(d)} (${d.toISOString().slice(0, 16)}Z)`).join(', ')}`);
    const local = created.upcoming.map(berlinParts);
    this.report.check(
      created.upcoming.length === 5 && local.every((p) => p.time === '09:00:00' && !['Sat', 'Sun'].includes(p.weekday)),
      'every next fire time is 09:00 Berlin time on a weekday',
    );
    const page = await this.client.listSchedules({ workflow: 'inventory.stock-report' });
    this.logger.log(`listSchedules → ${page.schedules.map((s) => `${s.id} (${s.source}${s.paused ? ', paused' : ''})`).join(', ')}`);
    this.report.check(
      page.schedules
        .map((s) => s.id)
        .sort()
        .join() === [STOCK_REPORT_SCHEDULE, id].sort().join(),
      'the workflow lists its declared and its runtime schedule',
    );
    const removed = await this.client.unschedule(id);
    const gone = await this.client.getSchedule(id);
    this.logger.log(`unschedule → ${removed}; getSchedule → ${JSON.stringify(gone)}`);
    this.report.check(removed && gone === null, 'the runtime schedule was removed');
  }

  /** 9b. An interval schedule: every second at half past, on the same due-index as cron. */
  private async intervalSchedule(): Promise<void> {
    this.report.section('9b. interval schedule: a stock sweep every 1 s at offset 500 ms ({ every: "1s", offsetMs: 500 })');
    const id = 'stock-sweep';
    const created = await this.client.schedule(id, StockReportWorkflow, { every: '1s', offsetMs: 500, input: { reorderBelow: 100 } });
    this.logger.log(
      `schedule → every ${created.every} ms, offset ${created.offsetMs} ms, next fire times: ${created.upcoming.map(utc).join(', ')}`,
    );
    this.report.check(
      created.cron === undefined && created.upcoming.every((d) => d.getTime() % 1_000 === 500),
      'an interval schedule fires at offset + k × every since the epoch',
    );
    const fired = await this.untilFired(id, 1);
    await this.client.unschedule(id);
    const report = await this.client.wait<StockReport>(fired.lastRunId!, WAIT);
    this.logger.log(`fired at ${utc(fired.lastFireAt)} → run ${fired.lastRunId} → ${JSON.stringify(report)}`);
    this.report.check(fired.lastFireAt!.getTime() % 1_000 === 500, 'its run started at an occurrence of the interval');
  }

  /** Polls getSchedule until the schedule has fired `count` times (bounded). */
  private async untilFired(id: string, count: number) {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const info = await this.client.getSchedule(id);
      if (info && info.fired >= count) return info;
      await latency(50);
    }
    throw new Error(`schedule "${id}" did not fire ${count} times within 10 s`);
  }
}

/** Time of day in UTC with ms, e.g. `12:25:32.000Z`. */
function utc(date: Date | null): string {
  return date ? `${date.toISOString().slice(11, 23)}Z` : 'never';
}

function berlin(date: Date): string {
  return date.toLocaleString('en-GB', {
    timeZone: BERLIN,
    weekday: 'short',
    day: 'numeric',
    month: 'short',
    hour: '2-digit',
    minute: '2-digit',
    timeZoneName: 'short',
  });
}

function berlinParts(date: Date): { weekday: string; time: string } {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone: BERLIN,
    weekday: 'short',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
  }).formatToParts(date);
  const part = (type: string) => parts.find((p) => p.type === type)?.value ?? '';
  return { weekday: part('weekday'), time: `${part('hour')}:${part('minute')}:${part('second')}` };
}
