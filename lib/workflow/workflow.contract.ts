import { InvalidOptionError } from '../errors';
import { checkInteger } from '../util/duration';
import { checkName } from '../util/names';
import { checkOptionKeys } from '../util/option-keys';

// This file must not import Nest, the decorators or the worker: a contract is what a producer
// imports *instead of* the workflow's class and everything that class depends on.

/**
 * Marks a {@link WorkflowContract} at runtime. `Symbol.for`, so two copies of the package in one
 * process (a contracts library with its own dependency, say) still recognise each other's contracts.
 */
export const WORKFLOW_CONTRACT: unique symbol = Symbol.for('nest-sluice.workflow-contract');

// Phantom keys: they exist only in the type system (nothing is emitted for them) and carry the
// contract's input and output. Exported only so that declaration files can name them.
export declare const contractInput: unique symbol;
export declare const contractOutput: unique symbol;

/**
 * A workflow's name and its input and output types, without its code: what a producer imports to
 * enqueue runs of a workflow that another service executes. Made by {@link defineWorkflow}; usable
 * wherever a `@Workflow` class is (`client.enqueue(OrderFulfil, input)`), and by the worker in
 * `@Workflow(OrderFulfil)`, which then checks the class's `run` against it.
 */
export interface WorkflowContract<In = unknown, Out = unknown> {
  readonly [WORKFLOW_CONTRACT]: true;
  /** The workflow name, as stored with every run. */
  readonly name: string;
  /** Attempts of runs enqueued through this contract (default: the module's `defaults.attempts`). */
  readonly attempts?: number;
  /** Never set: carries the input type. */
  readonly [contractInput]?: In;
  /** Never set: carries the output type. */
  readonly [contractOutput]?: Out;
}

/** Options of {@link defineWorkflow}. */
export interface WorkflowContractOptions {
  /**
   * Attempts of the runs enqueued through the contract in processes that do not run the workflow
   * (default: the module's `defaults.attempts`). A `@Workflow(contract)` class takes it as its own
   * `attempts`; giving the class a different one is a definition error, so there is one truth.
   */
  attempts?: number;
}

/**
 * The keys of {@link WorkflowContractOptions}. `input` and `output` are the Standard Schema
 * validators being added on another branch; listed already so that the two changes merge
 * without a refusal.
 */
const CONTRACT_OPTIONS: readonly string[] = ['attempts', 'input', 'output'];

/**
 * Declares a workflow contract: `export const OrderFulfil = defineWorkflow<OrderInput, OrderResult>('order.fulfil')`.
 * Put it where both the producer and the worker can import it (it depends on nothing but this
 * package); the worker declares `@Workflow(OrderFulfil)` on the class that runs it, and a producer
 * calls `client.run(OrderFulfil, input)` with the types inferred, without importing that class.
 * @param name the workflow name: letters, digits, `.`, `_`, `-`, at most 100 characters
 * @throws InvalidNameError, InvalidOptionError at once, so a bad contract fails where it is declared
 */
export function defineWorkflow<In = unknown, Out = unknown>(
  name: string,
  options: WorkflowContractOptions = {},
): WorkflowContract<In, Out> {
  checkName(name, 'defineWorkflow name');
  if (options === null || typeof options !== 'object')
    throw new InvalidOptionError(`defineWorkflow('${name}') options`, 'must be an object { attempts? }');
  checkOptionKeys(options, CONTRACT_OPTIONS, `defineWorkflow('${name}') options`);
  if (options.attempts !== undefined) checkInteger(options.attempts, `defineWorkflow('${name}') attempts`, 1, 1_000);
  return Object.freeze({
    [WORKFLOW_CONTRACT]: true as const,
    name,
    ...(options.attempts !== undefined && { attempts: options.attempts }),
  });
}

/** Whether `value` is a contract made by {@link defineWorkflow}. */
export function isWorkflowContract(value: unknown): value is WorkflowContract<unknown, unknown> {
  return typeof value === 'object' && value !== null && (value as { [WORKFLOW_CONTRACT]?: unknown })[WORKFLOW_CONTRACT] === true;
}
