import { InvalidOptionError } from '../errors';
import { checkInteger } from '../util/duration';
import { checkName } from '../util/names';
import { checkOptionKeys } from '../util/option-keys';
import { checkSchemaOption } from './schema.validate';
import type { SchemaInput, SchemaOutput, StandardSchemaV1 } from './standard-schema';

// This file must not import Nest, the decorators or the worker: a contract is what a producer
// imports *instead of* the workflow's class and everything that class depends on.

/**
 * Marks a {@link WorkflowContract} at runtime. `Symbol.for`, so two copies of the package in one
 * process (a contracts library with its own dependency, say) still recognise each other's contracts.
 */
export const WORKFLOW_CONTRACT: unique symbol = Symbol.for('nest-sluice.workflow-contract');

// Phantom keys: they exist only in the type system (nothing is emitted for them) and carry the
// contract's input and output. Exported only so that declaration files can name them.
/** Phantom key of {@link WorkflowContract}: carries the input type producers pass. */
export declare const contractInput: unique symbol;
/** Phantom key of {@link WorkflowContract}: carries the output type producers get back. */
export declare const contractOutput: unique symbol;
/** Phantom key of {@link WorkflowContract}: carries the type the workflow's `run` receives. */
export declare const contractRunInput: unique symbol;
/** Phantom key of {@link WorkflowContract}: carries the type the workflow's `run` returns. */
export declare const contractRunOutput: unique symbol;

/**
 * A workflow's name and its input and output types, without its code: what a producer imports to
 * enqueue runs of a workflow that another service executes. Made by {@link defineWorkflow}; usable
 * wherever a `@Workflow` class is (`client.enqueue(OrderFulfil, input)`), and by the worker in
 * `@Workflow(OrderFulfil)`, which then checks the class's `run` against it.
 *
 * `In` is what producers pass and `Out` what they get back; `RunIn` is what the workflow's `run`
 * receives and `RunOut` what it returns. They differ only with schemas that transform: `In` is
 * the input schema's input type and `RunIn` its output type, `RunOut` the output schema's input
 * type and `Out` its output type.
 */
export interface WorkflowContract<In = unknown, Out = unknown, RunIn = In, RunOut = Out> {
  /** Marks the object as a contract (see {@link isWorkflowContract}). */
  readonly [WORKFLOW_CONTRACT]: true;
  /** The workflow name, as stored with every run. */
  readonly name: string;
  /** Attempts of runs enqueued through this contract (default: the module's `defaults.attempts`). */
  readonly attempts?: number;
  /** The schema of the input: producers validate with it before enqueueing, the worker before `run`. */
  readonly input?: StandardSchemaV1;
  /** The schema of what `run` returns: the worker validates the result with it before storing it. */
  readonly output?: StandardSchemaV1;
  /** Never set: carries the input type. */
  readonly [contractInput]?: In;
  /** Never set: carries the output type. */
  readonly [contractOutput]?: Out;
  /** Never set: carries the type `run` receives. */
  readonly [contractRunInput]?: RunIn;
  /** Never set: carries the type `run` returns. */
  readonly [contractRunOutput]?: RunOut;
}

/** Options of {@link defineWorkflow}. */
export interface WorkflowContractOptions<
  I extends StandardSchemaV1 | undefined = StandardSchemaV1 | undefined,
  O extends StandardSchemaV1 | undefined = StandardSchemaV1 | undefined,
> {
  /**
   * A Standard Schema (zod, valibot, arktype…) of the input. Producers enqueueing through the
   * contract validate the input with it before any Redis call (`InputValidationError`, nothing
   * written) and store it as given; the worker validates the stored input again before `run`,
   * which receives the schema's output (transforms and defaults applied). The schema sees the
   * input after its JSON round trip on the worker: it must accept what JSON gives back.
   */
  input?: I;
  /**
   * A Standard Schema of the result: the worker validates what `run` returns with it and stores
   * the schema's output; a refused result fails the run at once (`OutputValidationError`).
   */
  output?: O;
  /**
   * Attempts of the runs enqueued through the contract in processes that do not run the workflow
   * (default: the module's `defaults.attempts`). A `@Workflow(contract)` class takes it as its own
   * `attempts`; giving the class a different one is a definition error, so there is one truth.
   */
  attempts?: number;
}

/** The keys of {@link WorkflowContractOptions}. */
const CONTRACT_OPTIONS: readonly string[] = ['attempts', 'input', 'output'];

/**
 * Declares a workflow contract typed by its schemas: `export const OrderFulfil =
 * defineWorkflow('order.fulfil', { input: OrderInput, output: OrderResult })` with Standard Schemas
 * (zod, valibot, arktype…). Producers pass the input schema's input type and get the output
 * schema's output type; the `@Workflow(OrderFulfil)` class's `run` takes the input schema's output
 * type and returns the output schema's input type. Without an output schema the result is `unknown`.
 * @throws InvalidNameError, InvalidOptionError at once, so a bad contract fails where it is declared
 */
export function defineWorkflow<I extends StandardSchemaV1 | undefined = undefined, O extends StandardSchemaV1 | undefined = undefined>(
  name: string,
  options: WorkflowContractOptions<I, O>,
): WorkflowContract<SchemaInput<I>, SchemaOutput<O>, SchemaOutput<I>, SchemaInput<O>>;
/**
 * Declares a workflow contract: `export const OrderFulfil = defineWorkflow<OrderInput, OrderResult>('order.fulfil')`.
 * Put it where both the producer and the worker can import it (it depends on nothing but this
 * package); the worker declares `@Workflow(OrderFulfil)` on the class that runs it, and a producer
 * calls `client.run(OrderFulfil, input)` with the types inferred, without importing that class.
 * Schemas given with explicit types validate at runtime, but the types are the ones given.
 * @param name the workflow name: letters, digits, `.`, `_`, `-`, at most 100 characters
 * @throws InvalidNameError, InvalidOptionError at once, so a bad contract fails where it is declared
 */
export function defineWorkflow<In = unknown, Out = unknown>(name: string, options?: WorkflowContractOptions): WorkflowContract<In, Out>;
export function defineWorkflow(name: string, options: WorkflowContractOptions = {}): WorkflowContract {
  checkName(name, 'defineWorkflow name');
  if (options === null || typeof options !== 'object')
    throw new InvalidOptionError(`defineWorkflow('${name}') options`, 'must be an object { input?, output?, attempts? }');
  checkOptionKeys(options, CONTRACT_OPTIONS, `defineWorkflow('${name}') options`);
  if (options.attempts !== undefined) checkInteger(options.attempts, `defineWorkflow('${name}') attempts`, 1, 1_000);
  const input = checkSchemaOption(options.input, `defineWorkflow('${name}') input`);
  const output = checkSchemaOption(options.output, `defineWorkflow('${name}') output`);
  return Object.freeze({
    [WORKFLOW_CONTRACT]: true as const,
    name,
    ...(options.attempts !== undefined && { attempts: options.attempts }),
    ...(input && { input }),
    ...(output && { output }),
  });
}

/** Whether `value` is a contract made by {@link defineWorkflow}. */
export function isWorkflowContract(value: unknown): value is WorkflowContract<unknown, unknown> {
  return typeof value === 'object' && value !== null && (value as { [WORKFLOW_CONTRACT]?: unknown })[WORKFLOW_CONTRACT] === true;
}
