import type { RunErrorInfo } from '../errors';

/** Longest message and stack a failure keeps, and longest error name. */
const MAX_ERROR_TEXT = 8 * 1024;
const MAX_ERROR_NAME = 200;

/**
 * A failed attempt's error as the run stores it, and as `WorkflowFailedError` carries it: name,
 * message and stack, clipped (a thrown non-Error is recorded as `Error` with its JSON as message).
 */
export function describeError(error: unknown): RunErrorInfo {
  if (error instanceof Error) {
    return {
      name: clip(String(error.name), MAX_ERROR_NAME),
      message: clip(String(error.message)),
      ...(error.stack && { stack: clip(String(error.stack)) }),
    };
  }
  return { name: 'Error', message: clip(typeof error === 'string' ? error : safeString(error)) };
}

function safeString(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

function clip(text: string, max = MAX_ERROR_TEXT): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
