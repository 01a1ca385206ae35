import { InvalidInputError } from './input.errors';
import { NonRetryableError } from './run.errors';

/** One issue a workflow's schema found: where (`input.items[2].qty`, `output.total`) and what. */
export interface ValidationIssue {
  /** The value's path, from `input` or `output` (the schema's own path, formatted). */
  readonly path: string;
  /** The schema library's message. */
  readonly message: string;
}

/** Every issue on one line each joined by `; `, so a message shows them all. */
function listIssues(issues: readonly ValidationIssue[]): string {
  const count = issues.length === 1 ? '1 issue' : `${issues.length} issues`;
  return `${count}: ${issues.map((issue) => `${issue.path}: ${issue.message}`).join('; ')}`;
}

/**
 * A run's input that the workflow's input schema (`@Workflow({ input })`, `defineWorkflow(name,
 * { input })`) refuses. A producer that knows the schema throws it before any Redis call (nothing
 * is written); a worker whose schema refuses a stored input (a producer without the schema, or with
 * an older one) fails the run with it at once, without retries. `issues` holds every issue; the
 * message lists them all with their paths.
 */
export class InputValidationError extends InvalidInputError {
  constructor(
    /** The offending argument, e.g. `input`, `items[2].input`, `ctx.invoke input`. */
    field: string,
    /** The workflow whose schema refused the input. */
    readonly workflow: string,
    /** Every issue the schema found, in its order. */
    readonly issues: readonly ValidationIssue[],
  ) {
    super(field, `does not match the input schema of workflow "${workflow}" (${listIssues(issues)})`);
  }
}

/**
 * What a workflow's `run` returned and its output schema (`@Workflow({ output })`) refused: the
 * run fails at once, without retries (the code would return the same again), and nothing of the
 * result is stored. `issues` holds every issue; the message lists them all with their paths.
 */
export class OutputValidationError extends NonRetryableError {
  constructor(
    /** The workflow whose schema refused the result. */
    readonly workflow: string,
    /** Every issue the schema found, in its order. */
    readonly issues: readonly ValidationIssue[],
  ) {
    super(`The result of workflow "${workflow}" does not match its output schema (${listIssues(issues)})`);
  }
}
