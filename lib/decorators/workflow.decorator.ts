import { Injectable } from '@nestjs/common';
import { checkRateLimit, MAX_LIMIT } from '../interfaces/rate-limit';
import { WORKFLOW_METADATA } from '../interfaces/queue.constants';
import { noteWorkflowClass } from '../workflow/step-classes.registry';
import { checkName } from '../util/names';
import { InvalidOptionError } from '../errors';
import { checkInteger } from '../util/duration';
import { checkDeclaredSchedules } from '../workflow/schedule.check';
import { MAX_TIMER_MS } from '../workflow/step.options';
import { checkOptionKeys } from '../util/option-keys';
import { checkDeclaredDedupe } from '../workflow/dedupe.check';
import { BACKOFF_OPTIONS } from '../interfaces/backoff.options';
import type { ContractImplementation, RetentionByCount, SchemaImplementation, WorkflowOptions } from '../workflow/workflow.types';
import { isWorkflowContract, type WorkflowContract } from '../workflow/workflow.contract';
import { checkSchemaOption } from '../workflow/schema.validate';
import { checkTriggerOptions } from '../workflow/trigger.options';
import { checkBatchOptions } from '../workflow/batch.options';
import type { SchemaInput, StandardSchemaV1 } from '../workflow/standard-schema';

/** The keys of {@link WorkflowOptions}. */
export const WORKFLOW_OPTIONS: readonly string[] = [
  'concurrency',
  'groupConcurrency',
  'indexCompleted',
  'rateLimit',
  'groupRateLimit',
  'attempts',
  'backoff',
  'timeoutMs',
  'schedules',
  'keep',
  'input',
  'output',
  'dedupe',
  'on',
  'filter',
  'batch',
];

const MAX_DELAY_MS = 365 * 86_400_000;

/** What `@Workflow` records on its class. */
export interface WorkflowMetadata {
  name: string;
  options: WorkflowOptions;
}

/**
 * Declares a workflow: a Nest provider (with the usual constructor injection) whose
 * `run(input, ctx)` is executed by Sluice workers. List the class in a module's `providers`.
 *
 * @param name unique per namespace; letters, digits, `.`, `_`, `-`. Stored with every run, so
 *   renaming a workflow strands its queued runs.
 */
export function Workflow<I extends StandardSchemaV1 | undefined = undefined, O extends StandardSchemaV1 | undefined = undefined>(
  name: string,
  // Omit: intersecting the schemas with WorkflowOptions' own `input` sends the compiler down an
  // arktype Type's whole structure (instantiation too deep).
  options?: Omit<WorkflowOptions<SchemaInput<I>>, 'input' | 'output'> & { input?: I; output?: O },
): WorkflowDecorator<I, O>;
/**
 * Declares the workflow of a contract made by `defineWorkflow`: the name is the contract's, and
 * the compiler checks that the class's `run` takes the contract's input and returns its output.
 * Producers then enqueue with the contract alone, without importing this class. The contract's
 * `attempts` and schemas are the workflow's; a different `options.attempts`, `input` or `output`
 * throws `InvalidOptionError`.
 */
export function Workflow<In, Out, RunIn, RunOut>(
  contract: WorkflowContract<In, Out, RunIn, RunOut>,
  options?: WorkflowOptions<In>,
): (target: ContractImplementation<RunIn, RunOut>) => void;
export function Workflow(nameOrContract: string | WorkflowContract, options: WorkflowOptions = {}): ClassDecorator {
  const contract = isWorkflowContract(nameOrContract) ? nameOrContract : undefined;
  const name = checkName(contract ? contract.name : nameOrContract, '@Workflow name');
  if (options === null || typeof options !== 'object') throw new InvalidOptionError(`@Workflow('${name}') options`, 'must be an object');
  checkOptionKeys(options, WORKFLOW_OPTIONS, `@Workflow('${name}') options`);
  options = withSchemas(name, options, contract);
  if (contract && options.attempts !== undefined && options.attempts !== contract.attempts) {
    // Producers enqueue with the contract alone: attempts set only here would not reach them.
    const where =
      contract.attempts === undefined
        ? 'the contract sets none (producers would use their default)'
        : `the contract's is ${contract.attempts}`;
    throw new InvalidOptionError(
      `@Workflow('${name}') attempts`,
      `${options.attempts} differs from the contract: ${where}; set attempts on defineWorkflow`,
    );
  }
  if (contract?.attempts !== undefined) options = { ...options, attempts: contract.attempts };
  if (options.concurrency !== undefined) checkInteger(options.concurrency, `@Workflow('${name}') concurrency`, 1, MAX_LIMIT);
  if (options.groupConcurrency !== undefined) checkInteger(options.groupConcurrency, `@Workflow('${name}') groupConcurrency`, 1, MAX_LIMIT);
  if (options.attempts !== undefined) checkInteger(options.attempts, `@Workflow('${name}') attempts`, 1, 1_000);
  if (options.rateLimit !== undefined) checkRateLimit(options.rateLimit, `@Workflow('${name}') rateLimit`);
  if (options.groupRateLimit !== undefined) checkRateLimit(options.groupRateLimit, `@Workflow('${name}') groupRateLimit`);
  if (options.timeoutMs !== undefined) checkInteger(options.timeoutMs, `@Workflow('${name}') timeoutMs`, 1, MAX_TIMER_MS);
  if (options.backoff !== undefined) {
    const field = `@Workflow('${name}') backoff`;
    if (options.backoff === null || typeof options.backoff !== 'object')
      throw new InvalidOptionError(field, 'must be an object { delayMs, factor?, maxDelayMs? }');
    checkOptionKeys(options.backoff, BACKOFF_OPTIONS, field);
    checkInteger(options.backoff.delayMs, `${field}.delayMs`, 0, MAX_DELAY_MS);
    if (options.backoff.maxDelayMs !== undefined) checkInteger(options.backoff.maxDelayMs, `${field}.maxDelayMs`, 0, MAX_DELAY_MS);
    if (options.backoff.factor !== undefined && !(Number.isFinite(options.backoff.factor) && options.backoff.factor > 0)) {
      throw new InvalidOptionError(`${field}.factor`, `must be a number > 0, got ${options.backoff.factor}`);
    }
  }
  if (options.keep !== undefined) checkKeep(name, options.keep);
  if (options.dedupe !== undefined) checkDeclaredDedupe(options.dedupe, `@Workflow('${name}') dedupe`);
  if (options.indexCompleted !== undefined && typeof options.indexCompleted !== 'boolean') {
    throw new InvalidOptionError(`@Workflow('${name}') indexCompleted`, `must be a boolean, got ${typeof options.indexCompleted}`);
  }
  if (options.batch !== undefined) checkBatchOptions(name, options.batch, options as Record<string, unknown>);
  const schedules = options.schedules === undefined ? undefined : checkDeclaredSchedules(name, options.schedules);
  const on = checkTriggerOptions(name, options);
  const metadata: WorkflowMetadata = { name, options: { ...options, ...(schedules && { schedules }), ...(on && { on }) } };
  return (target) => {
    Reflect.defineMetadata(WORKFLOW_METADATA, metadata, target);
    noteWorkflowClass(target);
    Injectable()(target);
  };
}

/**
 * What `@Workflow(name, options)` returns: a plain class decorator without schemas; with one, a
 * decorator that only takes a class whose `run` fits them (see {@link SchemaImplementation}).
 */
export type WorkflowDecorator<I, O> = [I, O] extends [undefined, undefined] ? ClassDecorator : (target: SchemaImplementation<I, O>) => void;

/**
 * The options with their schemas checked; with a contract, the contract's schemas, which a
 * different one here would contradict (producers see only the contract's).
 */
function withSchemas(name: string, options: WorkflowOptions, contract: WorkflowContract | undefined): WorkflowOptions {
  if (options === null || typeof options !== 'object') return options;
  const input = checkSchemaOption(options.input, `@Workflow('${name}') input`);
  const output = checkSchemaOption(options.output, `@Workflow('${name}') output`);
  if (!contract) return options;
  for (const [key, own, contracts] of [
    ['input', input, contract.input],
    ['output', output, contract.output],
  ] as const) {
    if (own !== undefined && own !== contracts)
      throw new InvalidOptionError(`@Workflow('${name}') ${key}`, `differs from the contract's; set the ${key} schema on defineWorkflow`);
  }
  if (!contract.input && !contract.output) return options;
  return { ...options, input: contract.input, output: contract.output };
}

/** Largest count `keep` accepts. */
const MAX_KEEP = 100_000_000;

function checkKeep(name: string, keep: RetentionByCount): void {
  const field = `@Workflow('${name}') keep`;
  if (keep === null || typeof keep !== 'object' || Array.isArray(keep))
    throw new InvalidOptionError(field, 'must be an object { completed?, failed? }');
  checkOptionKeys(keep, ['completed', 'failed'], field);
  for (const key of ['completed', 'failed'] as const) {
    const value = keep[key];
    if (value !== undefined) checkInteger(value, `${field}.${key}`, 0, MAX_KEEP);
  }
}
