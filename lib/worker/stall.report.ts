import type { Logger } from '@nestjs/common';
import type { RunStalledEvent } from '../interfaces/run.events';
import type { RunEvents } from './run.events';

/** Ids named in one stall warning; the rest are counted (a scan recovers up to 100 runs). */
const MAX_NAMED = 10;

/**
 * Emits a 'stalled' event per recovered run and logs one warning for the whole scan: a stall
 * means a worker died or blocked its event loop past its lease, which an operator wants to
 * hear of — once per scan, not once per run (a dead worker with 50 runs is one incident).
 */
export function reportStalled(stalled: RunStalledEvent[], events: RunEvents, logger: Pick<Logger, 'warn'>): void {
  if (stalled.length === 0) return;
  const requeued = stalled.filter((run) => run.requeued);
  const failed = stalled.filter((run) => !run.requeued);
  const name = (runs: RunStalledEvent[]) => {
    const named = runs
      .slice(0, MAX_NAMED)
      .map((run) => `${run.runId} (${run.workflow})`)
      .join(', ');
    return runs.length > MAX_NAMED ? `${named} and ${runs.length - MAX_NAMED} more` : named;
  };
  const parts = [
    ...(requeued.length ? [`${requeued.length} requeued: ${name(requeued)}`] : []),
    ...(failed.length ? [`${failed.length} failed for good (stalled more than maxStalls times): ${name(failed)}`] : []),
  ];
  try {
    logger.warn(
      `Recovered ${stalled.length} stalled run(s) whose lease ran out (their worker died, blocked its event loop, or lost Redis for longer than lockMs); ${parts.join('; ')}`,
    );
  } catch {
    // A logger that throws must not fail the reserve call that carried the recovery.
  }
  for (const run of stalled) events.emit('stalled', run);
}
