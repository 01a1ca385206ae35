import type { Context } from '@opentelemetry/api';
import type { OtelApi } from './otel.loader';

/**
 * Largest trace context stored with a run, in bytes of JSON. A W3C `traceparent` is 55 bytes;
 * what makes a carrier large is baggage, and every claim of the run ships the field, so past
 * this only `traceparent` and `tracestate` are kept (and nothing if even those are larger).
 */
export const MAX_TRACE_BYTES = 1024;

/** The headers of W3C Trace Context: what is kept of a carrier that is too large. */
const TRACE_CONTEXT_HEADERS = ['traceparent', 'tracestate'];

/**
 * The trace context active at the call, as the run field `trace`: the carrier the app's
 * configured propagator writes (W3C `traceparent`, plus `tracestate` and `baggage` if set), as
 * JSON. `undefined` when there is nothing to propagate (no span active, or no propagator
 * registered), so an untraced enqueue stores, sends and ships nothing more.
 */
export function captureTrace(api: OtelApi): string | undefined {
  const carrier: Record<string, string> = {};
  try {
    // Only a sampled span is continued: an unsampled one would give the run a non-recording
    // span anyway, and storing it would cost that enqueue the fast path (see lua/enqueue.lua).
    const span = api.trace.getSpanContext(api.context.active());
    if (!span || (span.traceFlags & api.TraceFlags.SAMPLED) === 0) return undefined;
    api.propagation.inject(api.context.active(), carrier);
  } catch {
    return undefined; // a propagator that throws costs the run its trace, never its enqueue
  }
  if (Object.keys(carrier).length === 0) return undefined;
  let encoded = JSON.stringify(carrier);
  if (Buffer.byteLength(encoded) <= MAX_TRACE_BYTES) return encoded;
  const kept: Record<string, string> = {};
  for (const key of TRACE_CONTEXT_HEADERS) if (typeof carrier[key] === 'string') kept[key] = carrier[key];
  encoded = JSON.stringify(kept);
  return encoded !== '{}' && Buffer.byteLength(encoded) <= MAX_TRACE_BYTES ? encoded : undefined;
}

/**
 * The context a claim's attempt continues: the one its enqueue propagated, or the root (never
 * the context active where the worker launched it, which may be another run's attempt: a refill
 * is launched from the complete call of the runs that freed its slot). A field that does not
 * parse (written by something else) is ignored: the attempt starts a trace of its own.
 */
export function restoreTrace(api: OtelApi, trace: string | undefined): Context {
  if (trace === undefined) return api.ROOT_CONTEXT;
  try {
    const carrier: unknown = JSON.parse(trace);
    if (carrier === null || typeof carrier !== 'object' || Array.isArray(carrier)) return api.ROOT_CONTEXT;
    return api.propagation.extract(api.ROOT_CONTEXT, carrier as Record<string, unknown>);
  } catch {
    return api.ROOT_CONTEXT;
  }
}
