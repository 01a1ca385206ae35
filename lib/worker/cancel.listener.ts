import { RunCancelledError } from '../errors';
import type { ActiveRuns } from './active-runs';

/**
 * Aborts the signal of a run this process executes as soon as it is cancelled. lua/cancel.lua
 * publishes `<id> <token> <reason>` on the namespace's cancel channel, which each worker process
 * listens to once (see WorkerChannels). A cancel therefore costs one publish however many runs
 * are in flight, and no worker polls Redis per run. A message published while the channel was
 * not subscribed (the subscriber reconnecting, or not yet open at boot, see BootQuiet) has the
 * lease heartbeat as backstop, since a cancelled run's lease no longer extends: one beat as soon
 * as the channel is subscribed again (see WorkerChannels), then every third of `worker.lockMs`.
 */
export class CancelListener {
  constructor(private readonly active: ActiveRuns) {}

  /** A message on the cancel channel. */
  onCancel(message: string): void {
    const [id, token] = message.split(' ', 2);
    const run = this.active.get(id);
    // Only the attempt cancelled: an older attempt of the same id in this process has lost its lease anyway.
    if (run?.token !== token) return;
    const reason = message.slice(id.length + token.length + 2);
    run.abort.abort(new RunCancelledError(id, reason || undefined));
  }
}
