import type { Attributes, Context, ProxyTracerProvider, Span, Tracer, TracerProvider } from '@opentelemetry/api';
import type { Claim } from '../redis/commands/claim.reply';
import { sluiceVersion, telemetryApi, type OtelApi, type TelemetrySwitch } from './otel.loader';
import { RunMetrics } from './run.metrics';
import { STEP_REPLAYED_EVENT, TELEMETRY_ATTRIBUTES as ATTR, TELEMETRY_SCOPE, type AttemptOutcome } from './telemetry.names';
import type { StepObserver } from '../execution/step.observer';
import { restoreTrace } from './trace.carrier';

/** Longest error text put on a span status: the full text is in the recorded exception. */
const MAX_STATUS_MESSAGE = 1024;

/**
 * The worker's OpenTelemetry: a CONSUMER span per run attempt, named `process <workflow>` as
 * messaging conventions name the processing of a message, with an INTERNAL child span per
 * executed step (`step <name>`), and the run metrics ({@link RunMetrics}). Made only when
 * telemetry is on ({@link RunTelemetry.create}); with it off, the worker holds `undefined` and
 * its path is the one without telemetry.
 *
 * An attempt span is a child of the trace context stored by the run's enqueue (see
 * lib/telemetry/trace.carrier.ts), so one trace shows the request that enqueued the run and
 * each of the run's attempts; a run enqueued without one (or fired by a schedule) starts a trace.
 */
export class RunTelemetry {
  private readonly tracer: Tracer;
  private readonly metrics: RunMetrics;
  /** Whether a meter provider was registered when the worker started (the metrics API is not proxied: later ones are not seen). */
  private readonly metered: boolean;
  /** What the API's tracer provider delegates to while no SDK is registered. */
  private readonly noTracing: TracerProvider;

  constructor(
    private readonly api: OtelApi,
    private readonly namespace: string,
    workflows: readonly string[],
  ) {
    const version = sluiceVersion();
    this.tracer = api.trace.getTracer(TELEMETRY_SCOPE, version);
    const meter = api.metrics.getMeter(TELEMETRY_SCOPE, version);
    this.metered = meter !== api.createNoopMeter();
    this.metrics = new RunMetrics(meter, workflows);
    this.noTracing = new api.ProxyTracerProvider().getDelegate();
  }

  /** The worker's telemetry if it is on for these options (and the API loads), else `undefined`. */
  static create(options: TelemetrySwitch & { namespace: string }, workflows: readonly string[]): RunTelemetry | undefined {
    const api = telemetryApi(options);
    return api && new RunTelemetry(api, options.namespace, workflows);
  }

  /**
   * Runs one attempt (`body`, which reports its outcome through the {@link AttemptTelemetry} it
   * is given) inside the attempt's span, and ends the span when `body` settles.
   */
  attempt(claim: Claim, body: (attempt?: AttemptTelemetry) => Promise<void>): Promise<void> {
    if (!this.recording()) return body(undefined);
    let attempt: AttemptTelemetry;
    try {
      attempt = new AttemptTelemetry(this.api, this.tracer, this.metrics, this.namespace, claim);
    } catch {
      // An SDK that throws (the API's contract says it must not) costs the run its span, not its attempt.
      return body(undefined);
    }
    return attempt.run(body);
  }

  /**
   * Whether attempts get spans and metrics. Not with the API installed (a dependency of many
   * packages) but no SDK registered: every span and instrument would be a no-op, so the attempt
   * skips them and allocates nothing for them. Asked per attempt: a tracer provider may come later.
   */
  recording(): boolean {
    return this.metered || this.tracing();
  }

  /** Whether a tracer provider is registered (the global one is a proxy that delegates to it, or to a no-op). */
  private tracing(): boolean {
    const provider = this.api.trace.getTracerProvider() as Partial<ProxyTracerProvider>;
    return (provider.getDelegate?.() ?? provider) !== this.noTracing;
  }

  /** Stops the active-runs gauge (at shutdown). */
  close(): void {
    this.metrics.close();
  }
}

/** The telemetry of one run attempt: its span, its steps' spans, its metrics. */
export class AttemptTelemetry implements StepObserver {
  private readonly span: Span;
  private readonly context: Context;
  private readonly startedAt = performance.now();
  private outcome?: AttemptOutcome;
  private replays = 0;

  constructor(
    private readonly api: OtelApi,
    private readonly tracer: Tracer,
    private readonly metrics: RunMetrics,
    namespace: string,
    private readonly claim: Claim,
  ) {
    const parent = restoreTrace(api, claim.trace);
    const attributes: Attributes = {
      'messaging.system': 'sluice',
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': claim.workflow,
      'messaging.message.id': claim.id,
      [ATTR.namespace]: namespace,
      [ATTR.workflow]: claim.workflow,
      [ATTR.runId]: claim.id,
      [ATTR.attempt]: claim.attempt,
    };
    if (claim.group !== undefined) attributes[ATTR.group] = claim.group;
    this.span = tracer.startSpan(`process ${claim.workflow}`, { kind: api.SpanKind.CONSUMER, attributes }, parent);
    this.context = api.trace.setSpan(parent, this.span);
    metrics.attemptStarted(claim.workflow, claim.queueWaitMs);
  }

  /** Runs the attempt in its span's context; whatever happens, ends the span and the active count. */
  async run(body: (attempt: AttemptTelemetry) => Promise<void>): Promise<void> {
    try {
      await this.api.context.with(this.context, body, undefined, this);
    } catch (error) {
      // The attempt's commit itself failed (Redis away for a whole lease): the lease lapses.
      this.ended('unknown', error);
      throw error;
    } finally {
      this.ended('unknown');
      this.span.end();
      this.metrics.attemptEnded(this.claim.workflow);
    }
  }

  /**
   * Reports how the attempt ended, once it is committed (or known lost); the first report wins.
   * `thrown`: what the attempt threw, if it threw (even `undefined`).
   */
  ended(outcome: AttemptOutcome, ...thrown: [unknown?]): void {
    if (this.outcome !== undefined) return;
    this.outcome = outcome;
    this.span.setAttribute(ATTR.outcome, outcome);
    if (this.replays > 0) this.span.setAttribute(ATTR.replayedSteps, this.replays);
    let errorType: string | undefined;
    if (outcome !== 'completed') {
      const error = thrown.length > 0 ? thrown[0] : undefined;
      const described = thrown.length > 0 ? describe(error) : NO_ERROR[outcome === 'lost' ? 'lost' : 'unknown'];
      errorType = described.name;
      this.fail(this.span, thrown.length > 0, error, described);
    }
    this.metrics.attemptOutcome(this.claim.workflow, outcome, performance.now() - this.startedAt, errorType);
  }

  replayed(name: string, key: string): void {
    this.replays++;
    this.span.addEvent(STEP_REPLAYED_EVENT, { [ATTR.stepName]: name, [ATTR.stepKey]: key });
  }

  executed<T>(name: string, key: string, execute: () => Promise<T>): Promise<T> {
    const { api } = this;
    // The step's parent is whatever span is active where it was called (the attempt, or a span
    // of the workflow's own); without a context manager nothing is ever active: the attempt.
    const active = api.context.active();
    const parent = api.trace.getSpan(active) ? active : this.context;
    const span = this.tracer.startSpan(
      `step ${name}`,
      { kind: api.SpanKind.INTERNAL, attributes: { [ATTR.stepName]: name, [ATTR.stepKey]: key } },
      parent,
    );
    const startedAt = performance.now();
    const done = (error: unknown) => {
      let errorType: string | undefined;
      if (error !== NONE) {
        const described = describe(error);
        errorType = described.name;
        this.fail(span, true, error, described);
      }
      span.end();
      this.metrics.stepExecuted(this.claim.workflow, name, performance.now() - startedAt, errorType);
    };
    return api.context.with(api.trace.setSpan(parent, span), execute).then(
      (value) => {
        done(NONE);
        return value;
      },
      (error: unknown) => {
        done(error);
        throw error;
      },
    );
  }

  /** Error status, `error.type`, and the exception as a span event. */
  private fail(span: Span, threw: boolean, error: unknown, described: { name: string; message: string }): void {
    span.setAttribute(ATTR.errorType, described.name);
    if (threw) span.recordException(error instanceof Error ? error : described);
    const message = `${described.name}: ${described.message}`;
    span.setStatus({
      code: this.api.SpanStatusCode.ERROR,
      message: message.length > MAX_STATUS_MESSAGE ? `${message.slice(0, MAX_STATUS_MESSAGE)}…` : message,
    });
  }
}

/** What a step's `done` gets when the step did not throw (anything else, `undefined` included, was thrown). */
const NONE = Symbol('no error');

/** Why an attempt that threw nothing did not complete. */
const NO_ERROR = {
  // Found at the commit: the workflow finished, but its result was discarded.
  lost: { name: 'LeaseLostError', message: 'lease lost: the result was discarded; another worker carries the run on' },
  unknown: { name: 'Error', message: 'the attempt ended without a known outcome' },
};

/** Name and message of anything thrown; never throws itself (String() can, on odd objects). */
function describe(error: unknown): { name: string; message: string } {
  try {
    if (error instanceof Error) return { name: String(error.name).slice(0, 200), message: String(error.message) };
    return { name: 'Error', message: typeof error === 'string' ? error : (JSON.stringify(error) ?? String(error)) };
  } catch {
    return { name: 'Error', message: 'a value that cannot be printed' };
  }
}
