/**
 * The Redis key layout, in one place. Every key of a namespace starts with the hash tag
 * `{<prefix>:<namespace>}` so all of them live in one cluster slot and every Lua script touches a
 * single slot. Scripts that reach keys not known in advance (a run's workflow, say) build them
 * from {@link RedisKeys.base} with the same suffixes as below — keep the two in step.
 *
 * | key | type | holds |
 * |---|---|---|
 * | `run:<id>` | hash | the run record (state, input, attempts, result…) |
 * | `steps:<id>` | hash | step memo: `<step>#<n>` → encoded result |
 * | `done:<id>` | channel | finished-run announcement, carrying the result |
 * | `wf:<name>:waiting` | zset | due runs, score = priority band + FIFO sequence |
 * | `wf:<name>:active` | set | runs holding a slot of this workflow |
 * | `wf:<name>:wake` | list | wake marker, or fast-path handoffs, for workers blocked on this workflow |
 * | `wf:<name>:parked` | zset | workers about to block on this workflow, score = entry expiry (ms) |
 * | `delayed` | zset | runs not yet due, score = due time (ms) |
 * | `leases` | zset | active runs, score = lease deadline (ms) |
 * | `limits` | hash | fleet-wide caps: `wf:<name>` → limit |
 * | `seq` | string | FIFO sequence for waiting scores |
 * | `stall-gate` | string | at most one stalled scan per interval, fleet-wide |
 */
export class RedisKeys {
  readonly base: string;
  readonly delayed: string;
  readonly leases: string;
  readonly limits: string;
  readonly seq: string;
  readonly stallGate: string;

  constructor(
    readonly prefix: string,
    readonly namespace: string,
  ) {
    this.base = `{${prefix}:${namespace}}:`;
    this.delayed = `${this.base}delayed`;
    this.leases = `${this.base}leases`;
    this.limits = `${this.base}limits`;
    this.seq = `${this.base}seq`;
    this.stallGate = `${this.base}stall-gate`;
  }

  run(id: string): string {
    return `${this.base}run:${id}`;
  }

  steps(id: string): string {
    return `${this.base}steps:${id}`;
  }

  done(id: string): string {
    return `${this.base}done:${id}`;
  }

  waiting(workflow: string): string {
    return `${this.base}wf:${workflow}:waiting`;
  }

  active(workflow: string): string {
    return `${this.base}wf:${workflow}:active`;
  }

  wake(workflow: string): string {
    return `${this.base}wf:${workflow}:wake`;
  }

  parked(workflow: string): string {
    return `${this.base}wf:${workflow}:parked`;
  }

  /** Field of {@link limits} holding a workflow's cap. */
  workflowLimitField(workflow: string): string {
    return `wf:${workflow}`;
  }
}
