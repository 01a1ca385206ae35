import * as otel from '@opentelemetry/api';
import { context, propagation, ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { QueueConfigError } from '../../lib';
import { loadOpenTelemetry, telemetryApi } from '../../lib/telemetry/otel.loader';
import { resolveTelemetryOptions } from '../../lib/interfaces/telemetry.options';
import { captureTrace, MAX_TRACE_BYTES, restoreTrace } from '../../lib/telemetry/trace.carrier';

/**
 * `@opentelemetry/api` is an optional peer dependency, loaded with a guarded require: an app
 * without it must work and pay nothing. Here the loader is given requires that fail the ways a
 * missing or unusable package does; test/e2e/telemetry.spec.ts runs a whole app without it.
 */
describe('the OpenTelemetry loader', () => {
  it('reports the API absent when the require throws, as for a package that is not installed', () => {
    const notInstalled = (id: string) => {
      throw Object.assign(new Error(`Cannot find module '${id}'`), { code: 'MODULE_NOT_FOUND' });
    };
    expect(loadOpenTelemetry(notInstalled)).toBeUndefined();
  });

  it('reports it absent when the module lacks part of the API (older than 1.3), rather than half-instrument', () => {
    expect(loadOpenTelemetry(() => ({ trace: otel.trace, context: otel.context }))).toBeUndefined();
    expect(loadOpenTelemetry(() => undefined)).toBeUndefined();
  });

  it('loads the installed API (a devDependency here)', () => {
    expect(loadOpenTelemetry()).toBe(otel);
    expect(telemetryApi({ telemetry: { enabled: true } })).toBe(otel);
  });

  it('honours telemetry.enabled: false although the API is installed', () => {
    expect(telemetryApi({ telemetry: { enabled: false } })).toBeUndefined();
  });

  it('validates the module option', () => {
    expect(resolveTelemetryOptions(undefined)).toEqual({ enabled: true });
    expect(resolveTelemetryOptions({})).toEqual({ enabled: true });
    expect(resolveTelemetryOptions({ enabled: false })).toEqual({ enabled: false });
    expect(() => resolveTelemetryOptions(true as never)).toThrow(QueueConfigError);
    expect(() => resolveTelemetryOptions({ enabled: 'no' as never })).toThrow(/telemetry\.enabled must be true or false/);
  });
});

describe('the trace context stored with a run', () => {
  const spanContext = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.SAMPLED };
  const inSpan = <T>(fn: () => T) => context.with(trace.setSpanContext(ROOT_CONTEXT, spanContext), fn);

  beforeAll(() => context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable()));
  afterEach(() => propagation.disable());
  afterAll(() => context.disable());

  it('is nothing without a propagator, or without a span: an untraced enqueue sends no argument', () => {
    expect(inSpan(() => captureTrace(otel))).toBeUndefined(); // no propagator registered
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    expect(captureTrace(otel)).toBeUndefined(); // no span active
  });

  it('is the W3C traceparent of the active span, restored as the parent context on the worker', () => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const stored = inSpan(() => captureTrace(otel));
    expect(JSON.parse(stored!)).toEqual({ traceparent: `00-${spanContext.traceId}-${spanContext.spanId}-01` });
    const restored = trace.getSpanContext(restoreTrace(otel, stored));
    expect(restored).toMatchObject({ traceId: spanContext.traceId, spanId: spanContext.spanId, isRemote: true });
  });

  it('keeps only traceparent and tracestate when baggage makes it too large', () => {
    propagation.setGlobalPropagator(
      new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
    );
    const small = propagation.setBaggage(
      trace.setSpanContext(ROOT_CONTEXT, spanContext),
      propagation.createBaggage({ tenant: { value: 'a' } }),
    );
    expect(Object.keys(JSON.parse(context.with(small, () => captureTrace(otel))!))).toEqual(['traceparent', 'baggage']);
    const large = propagation.setBaggage(
      trace.setSpanContext(ROOT_CONTEXT, spanContext),
      propagation.createBaggage({ blob: { value: 'x'.repeat(MAX_TRACE_BYTES) } }),
    );
    const stored = context.with(large, () => captureTrace(otel))!;
    expect(Object.keys(JSON.parse(stored))).toEqual(['traceparent']);
  });

  it('starts a trace of its own from a field that does not parse', () => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    for (const bad of ['not json', '[1]', 'null', '{"traceparent":"garbage"}']) {
      expect(trace.getSpanContext(restoreTrace(otel, bad))).toBeUndefined();
    }
    expect(restoreTrace(otel, undefined)).toBe(ROOT_CONTEXT);
  });
});
