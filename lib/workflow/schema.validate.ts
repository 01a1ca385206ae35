import { InputValidationError, InvalidOptionError, OutputValidationError, type ValidationIssue } from '../errors';
import { isThenable } from '../util/thenable';
import type { StandardSchemaV1 } from './standard-schema';

/** A schema's answer for a value it accepts: `value` is its output (transforms and defaults applied). */
export type Validated = StandardSchemaV1.SuccessResult<unknown>;

/** A workflow's schemas, as its definition holds them (none: nothing is validated, nothing paid). */
export interface WorkflowSchemas {
  readonly input?: StandardSchemaV1;
  readonly output?: StandardSchemaV1;
}

/** Whether `value` is a Standard Schema V1 (an object or function with a `~standard` of version 1 and a `validate`). */
export function isStandardSchema(value: unknown): value is StandardSchemaV1 {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false;
  const props = (value as { '~standard'?: { version?: unknown; validate?: unknown } })['~standard'];
  return typeof props === 'object' && props !== null && props.version === 1 && typeof props.validate === 'function';
}

/**
 * Checks an `input` or `output` option where it is declared.
 * @throws InvalidOptionError for anything but a Standard Schema V1
 */
export function checkSchemaOption(value: unknown, field: string): StandardSchemaV1 | undefined {
  if (value === undefined || isStandardSchema(value)) return value;
  throw new InvalidOptionError(
    field,
    'must be a Standard Schema V1 (a zod, valibot, arktype… schema: an object with a "~standard" property of version 1)',
  );
}

/**
 * Validates a run's input with `schema`: the schema's answer, synchronously when the schema is,
 * else a promise of it (so a synchronous schema costs no await).
 * @param field what the input was given as, for the error (`input`, `items[2].input`…)
 * @throws InputValidationError (or rejects with it) listing every issue
 */
export function validateInput(schema: StandardSchemaV1, value: unknown, workflow: string, field = 'input'): Validated | Promise<Validated> {
  const result = schema['~standard'].validate(value);
  if (isThenable(result)) return Promise.resolve(result).then((settled) => inputChecked(settled, workflow, field));
  return inputChecked(result, workflow, field);
}

/**
 * Validates what a workflow's `run` returned with its output schema; as {@link validateInput}.
 * @throws OutputValidationError (or rejects with it) listing every issue
 */
export function validateOutput(schema: StandardSchemaV1, value: unknown, workflow: string): Validated | Promise<Validated> {
  const result = schema['~standard'].validate(value);
  if (isThenable(result)) return Promise.resolve(result).then((settled) => outputChecked(settled, workflow));
  return outputChecked(result, workflow);
}

function inputChecked(result: StandardSchemaV1.Result<unknown>, workflow: string, field: string): Validated {
  if (result.issues) throw new InputValidationError(field, workflow, issuesOf(result.issues, 'input'));
  return result;
}

function outputChecked(result: StandardSchemaV1.Result<unknown>, workflow: string): Validated {
  if (result.issues) throw new OutputValidationError(workflow, issuesOf(result.issues, 'output'));
  return result;
}

/** The schema's issues with their paths formatted from `root`; an empty list (a schema's bug) still fails, as one issue. */
function issuesOf(issues: ReadonlyArray<StandardSchemaV1.Issue>, root: string): ValidationIssue[] {
  if (issues.length === 0) return [{ path: root, message: 'refused by the schema (it reported no issue)' }];
  return issues.map((issue) => ({ path: formatPath(root, issue.path), message: String(issue.message) }));
}

/** `input.items[2].qty`: identifiers after a dot, indexes and other keys in brackets. */
export function formatPath(root: string, path: StandardSchemaV1.Issue['path']): string {
  let text = root;
  for (const segment of path ?? []) {
    const key = typeof segment === 'object' && segment !== null ? segment.key : segment;
    if (typeof key === 'number') text += `[${key}]`;
    else if (typeof key === 'symbol') text += `[${key.toString()}]`;
    else if (/^[A-Za-z_$][\w$]*$/.test(key)) text += `.${key}`;
    else if (/^(0|[1-9]\d*)$/.test(key)) text += `[${key}]`;
    else text += `[${JSON.stringify(key)}]`;
  }
  return text;
}

/**
 * A producer's check of one input, where it knows the workflow's schema: throws at once for a
 * synchronous schema, and returns a promise only for an async one (so that the caller awaits
 * nothing otherwise).
 */
export function checkInput(
  workflow: { name: string; input?: StandardSchemaV1 },
  input: unknown,
  field?: string,
): Promise<Validated> | undefined {
  if (workflow.input === undefined) return undefined;
  const checked = validateInput(workflow.input, input, workflow.name, field);
  return isThenable(checked) ? checked : undefined;
}

/** {@link checkInput} for each item of a batch (`items[i].input`); a promise only if some schema call was async. */
export function checkInputs(
  workflow: { name: string; input?: StandardSchemaV1 },
  items: ReadonlyArray<{ input: unknown }>,
  field = 'items',
): Promise<unknown> | undefined {
  if (workflow.input === undefined) return undefined;
  let pending: Promise<Validated>[] | undefined;
  items.forEach((item, index) => {
    const checked = checkInput(workflow, item.input, `${field}[${index}].input`);
    if (checked) (pending ??= []).push(checked);
  });
  return pending && Promise.all(pending);
}
