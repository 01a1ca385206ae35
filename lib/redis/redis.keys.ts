/**
 * The Redis key layout, in one place. Every key of a namespace starts with the hash tag
 * `{<prefix>:<namespace>}` so all of them live in one cluster slot and every Lua script touches a
 * single slot. Scripts build the keys they reach from {@link RedisKeys.base} with the same
 * suffixes (lua/includes/*.lua) — keep the two in step.
 *
 * | key | type | holds |
 * |---|---|---|
 * | `run:<id>` | hash | the run record (state, input, attempts, result…, `waited`: where its end is announced, `1` for its done channel and/or an inbox id, `trace`: the enqueue's trace context, only with OpenTelemetry on and a span active; `timeoutMs`: the enqueue's `runTimeoutMs`, only when set; `progress` and `progressSeq`: the latest `ctx.progress` value and its number) and its step memo (`step:<name>#<n>`, and, written with each durable wait, the position of every top-level call before it: `step:@<p>` = `<kind>:<name>#<n>`); in a durable wait, `wait` and `waitLeft`; a child run's `parent` (`<parent id> <memo key>`); `links` when it has a parent or a mailbox; a run enqueued with a dedupe (lua/enqueue-dedupe.lua): `dedupeKey`, `dedupeMode`, `dedupeCount` (enqueues folded into it), `dedupeInput` (the number of the one whose input it holds), `dedupeLast` (the nonce of the latest); a batch member (docs/batches.md): state `batched` and `batch` (its batch run's id); a batch run: `batchOf` (its members' workflow) |
 * | `dedupe:<workflow>:<key>` | string | a dedupe window (`EnqueueOptions.dedupe`): the id of its run, expiring with the window (throttle: ttl after the first enqueue; debounce: a ttl past the run's due time); a key naming a run that is no longer the window's (cancelled, removed, started) is replaced by the next enqueue |
 * | `done:<id>` | channel | finished-run announcement, carrying the result, for `wait()` (and `run()` with `onProgress`, or before its process's inbox is live) |
 * | `inbox:<inbox id>` | channel | one per process that calls `run()`: the announcements of the runs its calls enqueued, `<run id> <announcement>` (lib/client/run.inbox.ts) |
 * | `cancel` | channel | `<id> <token> <reason>` of each active run cancelled, for the worker running it (lua/cancel.lua) |
 * | `cascade:<id>` | list | the children a cancel of run `<id>` has still to visit, `<parent id> <child id>`, breadth first (lua/cancel.lua: a cascade is batched) |
 * | `cascades` | zset | runs whose cancel cascade is unfinished, score = when it last moved (ms): a cancel call with budget to spare carries on those left still |
 * | `progress:<id>` | channel | a run's progress values (`{"v":1,"seq","value"}`), published only while someone waits on the run (lua/progress.lua) |
 * | `wf:<name>:queue` | list | due ungrouped runs of priority 0, FIFO |
 * | `wf:<name>:waiting` | zset | due ungrouped runs of priority > 0, score = priority band + FIFO sequence |
 * | `wf:<name>:g:<group>:queue` / `:waiting` | list / zset | the same, per group |
 * | `wf:<name>:g:<group>:active` | set | runs holding a slot of the group |
 * | `wf:<name>:ready` | zset | groups with due runs and room under their cap: the round-robin, score = turn |
 * | `wf:<name>:groups` | set | groups with due or active runs |
 * | `wf:<name>:active` | set | runs holding a slot of the workflow |
 * | `wf:<name>:delayed` | zset | runs not yet due (delayed, in backoff, or in a durable wait with a deadline), score = due time (ms) |
 * | `wf:<name>:sleeping` / `:waiting-signal` / `:waiting-event` / `:waiting-child` | zset | runs in a durable wait of that kind, score = deadline (ms; 2^52 for none) (lua/includes/waits.lua) |
 * | `event:<name>\|<key>` | set | runs waiting for that event name and key (`ctx.waitForEvent`) |
 * | `on:<event>` | hash | the workflows subscribed to an event name (`@Workflow({ on })`), each → the max attempts of the runs it starts (`''` = the default); written by worker bootstraps (lua/declare-triggers.lua), read by lua/publish.lua |
 * | `wf:<name>:on` | set | the event names the workflow's code subscribed it to, at the latest bootstrap (lua/declare-triggers.lua unsubscribes the names it drops) |
 * | `published:<event id>` | hash | a published event (lua/publish.lua): `name`, `at` (ms), `nonce` of the publishing call, `runs` (`<workflow> <run id> <1 created \| 0>` …), `resumed` (waiting runs resumed); expires after the publisher's `resultTtlMs`: a publish of the same id meanwhile writes nothing |
 * | `published-by:<event>` | zset | the ids of the events published under a name, score = publish time (ms); trimmed to `resultTtlMs` and the newest 10,000 (the dashboard's event filter) |
 * | `mailbox:<id>` | list | signals sent to a run that was not waiting for them, `<name> <envelope>`, oldest first (lua/signal.lua) |
 * | `wf:<name>:wake` | list | wake marker, or fast-path handoffs (to workers of older releases), for workers blocked on the workflow |
 * | `wf:<name>:parked` | zset | workers about to block on the workflow, score = entry expiry (ms); entry `<worker id>:h:<lease ms>` (`<worker id>:<lease ms>` from older releases) |
 * | `handoff:<worker id>` | channel | fast-path handoffs to a parked worker, `<workflow> <token> <run id> <input>` (lua/includes/enqueue.lua deliverHandoff) |
 * | `wf:<name>:completed` / `:failed` / `:cancelled` | zset | finish indexes: the workflow's runs that ended in that state, score = finish order (max(the index's last score + 1, finish ms × 1024)); trimmed by retention (lua/includes/finish.lua countFinished), paged by `listRuns` |
 * | `wf:<name>:stats` | hash | running totals of completed, failed and cancelled runs; `groupDue`, the runs due in group lanes (exact once `groupDueExact` is set, see lua/stats.lua) |
 * | `wf:<name>:rate-log` / `wf:<name>:g:<group>:rate-log` | list | recent run starts (ms, newest first, at most the rate limit's max) of a rate-limited workflow / group |
 * | `wf:<name>:rate-held` | zset | groups with due runs held back by their rate limit, score = when their window frees (ms) |
 * | `wf:<name>:rate-review` | zset | groups a rate limit held that a review under way (after the limit was raised or removed) has yet to look at; flagged by `wf:<name>:rate-review` in `limits` (lua/includes/rate-reviews.lua startRateReview) |
 * | `leases` | zset | every active run of the namespace, score = lease deadline (ms) |
 * | `limits` | hash | fleet-wide caps: `ns`, `wf:<name>`, `wf:<name>:group`, `wf:<name>:g:<group>`; retention by count `wf:<name>:keep:completed` / `:keep:failed` (from `@Workflow({ keep })`), `wf:<name>:ttl-max` (the longest `resultTtlMs` of the processes that indexed the workflow's finished runs: the finish indexes are trimmed by it), `wf:<name>:index-completed` (`@Workflow({ indexCompleted })`); `wf:<name>:overrides` (how many groups have a cap of their own, so no override costs one read); controls (lua/includes/limits.lua): `wf:<name>:paused`, `wf:<name>:g:<group>:paused`, rate limits `wf:<name>:rate`/`:rate-ms`, `wf:<name>:group-rate`/`:group-rate-ms`, `wf:<name>:g:<group>:rate`/`:rate-ms`, and the counters `controls`, `wf:<name>:paused-groups`, `wf:<name>:rate-overrides`; `wf:<name>:rate-review` while a rate review is under way. A namespace with none of them has no limits hash (claiming calls look for it once, see primeLimits) |
 * | `runtime-limits` | hash | the fields of `limits` that code declares (`ns`, `wf:<name>`, `wf:<name>:group`, `wf:<name>:rate`, `wf:<name>:group-rate`) set at runtime by `setLimits`, each with the value the code declared then (`''` = none; a rate limit as `<max>/<ms>`): a bootstrap keeps them until its code declares something else (lua/includes/origins.lua). No entry = the code's value |
 * | `ns-waiting` | zset | workflows with due runs the namespace cap held back, score = turn (lua/includes/slots.lua wakeNamespaceWaiters) |
 * | `workflows` | set | workflows registered by worker processes |
 * | `batch:<id>` | list | the member run ids of batch run `<id>`, in enqueue order; expires with the batch's record (lua/enqueue-batch.lua, docs/batches.md) |
 * | `wf:<name>.batch:open` / `wf:<name>.batch:open:<key>` | string | the batch run members of workflow `<name>` (of that batch key) join while it is delayed and never claimed; expires after the max wait |
 * | `seq` | string | FIFO sequence within a priority |
 * | `turn` | string | round-robin turns, taken in blocks |
 * | `stall-gate` | string | at most one stalled scan per interval, fleet-wide |
 * | `call:<id>` | string | the claims of one claiming call, kept one lease length for its retry after a lost reply |
 * | `orphans` | list | the latest 1,000 ids popped from a lane that had no run record |
 * | `schedule:<id>` | hash | a cron schedule, the truth: definition, `next` fire, `plan` (the occurrences after it), `last` fire, `paused`, `rev` (lua/includes/schedules.lua) |
 * | `schedules` | zset | every schedule id (score 0, paged in id order) |
 * | `wf:<name>:schedules` | zset | the workflow's schedule ids (score 0) |
 * | `wf:<name>:next-fires` | zset | index derived from the schedule hashes: unpaused schedules, score = next fire (ms) |
 * | `wf:<name>:declared` | set | ids of the workflow's schedules declared in code (removed when the code drops them) |
 * | `wf:<name>:declarations` | hash | every set of schedules the workflow's code declared (by fingerprint) → its number, in the order they first reached the namespace: a bootstrap removes a dropped schedule only if a declaration numbered before its own declared it (lua/schedule-write.lua; a schedule's `decl` field) |
 * | `wf:<name>:sweep` | string | where the schedule index repair sweep stopped |
 * | `schema` | string | the namespace's key layout number (lib/migration/layout.versions.ts); absent before layout 2 |
 * | `slot-guard:1` / `slot-guard:2` (`slot-guard:sharded` on a cluster) | — | never written: on a cluster every script call declares them, so Redis Cluster refuses a script while the slot migrates (lib/redis/lua.scripts.ts); the second says how to publish |
 * | `migrate-lock` | string | the token of the process migrating the namespace, with a TTL it renews |
 */
export class RedisKeys {
  readonly base: string;
  readonly leases: string;
  readonly limits: string;
  readonly runtimeLimits: string;
  readonly workflows: string;
  readonly seq: string;
  readonly stallGate: string;
  readonly schema: string;
  readonly migrateLock: string;
  readonly schedules: string;
  readonly cancel: string;
  readonly cascades: string;

  constructor(
    readonly prefix: string,
    readonly namespace: string,
  ) {
    this.base = `{${prefix}:${namespace}}:`;
    this.leases = `${this.base}leases`;
    this.limits = `${this.base}limits`;
    this.runtimeLimits = `${this.base}runtime-limits`;
    this.workflows = `${this.base}workflows`;
    this.seq = `${this.base}seq`;
    this.stallGate = `${this.base}stall-gate`;
    this.schema = `${this.base}schema`;
    this.migrateLock = `${this.base}migrate-lock`;
    this.schedules = `${this.base}schedules`;
    this.cancel = `${this.base}cancel`;
    this.cascades = `${this.base}cascades`;
  }

  /**
   * Two keys that never exist, declared by every script call on a cluster (see SLOT_GUARD_KEYS in lua.scripts.ts).
   * The second also tells the scripts how to publish: `slot-guard:sharded` on a cluster
   * (`publish` in lua/includes/util.lua).
   */
  slotGuard(sharded: boolean): string[] {
    return [`${this.base}slot-guard:1`, `${this.base}slot-guard:${sharded ? 'sharded' : '2'}`];
  }

  run(id: string): string {
    return `${this.base}run:${id}`;
  }

  /** The member ids of batch run `id` (docs/batches.md). */
  batch(id: string): string {
    return `${this.base}batch:${id}`;
  }

  /** Where a claiming call (reserve, complete) keeps its claims for a retry after a lost reply. */
  call(callId: string): string {
    return `${this.base}call:${callId}`;
  }

  /** A published event's record (lua/publish.lua): its name, time, and the runs it started. */
  published(eventId: string): string {
    return `${this.base}published:${eventId}`;
  }

  /** The ids of the events published under a name, score = publish time (lua/publish.lua). */
  publishedBy(event: string): string {
    return `${this.base}published-by:${event}`;
  }

  /** The workflows subscribed to an event name (lua/declare-triggers.lua). */
  subscribers(event: string): string {
    return `${this.base}on:${event}`;
  }

  /** The children a cancel of run `id` has still to visit (see lua/cancel.lua). */
  cascade(id: string): string {
    return `${this.base}cascade:${id}`;
  }

  schedule(id: string): string {
    return `${this.base}schedule:${id}`;
  }

  done(id: string): string {
    return `${this.base}done:${id}`;
  }

  /** A dedupe window of a workflow (see the table above, and lua/enqueue-dedupe.lua). */
  dedupe(workflow: string, key: string): string {
    return `${this.base}dedupe:${workflow}:${key}`;
  }

  /** A process's inbox channel, where the runs its run() calls enqueued are announced (see RunInbox). */
  inbox(id: string): string {
    return `${this.base}inbox:${id}`;
  }

  /** The channel a run's progress values are published on (see lua/progress.lua). */
  progress(id: string): string {
    return `${this.base}progress:${id}`;
  }

  /** A key of a workflow (see the table above). */
  workflow(
    name: string,
    suffix:
      | 'wake'
      | 'parked'
      | 'active'
      | 'delayed'
      | 'ready'
      | 'groups'
      | 'stats'
      | 'schedules'
      | 'next-fires'
      | 'declared'
      | 'declarations'
      | 'sleeping'
      | 'waiting-signal'
      | 'waiting-event'
      | 'waiting-child',
  ): string {
    return `${this.base}wf:${name}:${suffix}`;
  }

  /** A workflow's finish index of a final state (see the table above). */
  finished(name: string, state: 'completed' | 'failed' | 'cancelled'): string {
    return `${this.base}wf:${name}:${state}`;
  }

  /** A key of a lane (a workflow's ungrouped runs, or one group): `queue`, `waiting`, or a group's `active`. */
  lane(workflow: string, group: string | undefined, suffix: 'queue' | 'waiting' | 'active'): string {
    return group ? `${this.base}wf:${workflow}:g:${group}:${suffix}` : `${this.base}wf:${workflow}:${suffix}`;
  }

  /** The channel a worker's fast-path handoffs are published on (see the table above). */
  handoff(workerId: string): string {
    return `${this.base}handoff:${workerId}`;
  }

  wake(workflow: string): string {
    return this.workflow(workflow, 'wake');
  }
}
