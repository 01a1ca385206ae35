import type { Stored } from '../workflow/payload.types';
import type { WorkflowContract } from '../workflow/workflow.contract';
import type { WorkflowClass, WorkflowInput, WorkflowOutput } from '../workflow/workflow.types';

/**
 * A workflow given by its class or by a contract from `defineWorkflow` (types inferred), or by
 * its name (typed `unknown`). A name or contract that no `@Workflow` of this process declares must
 * have been registered in Redis by some worker's bootstrap.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any contract, whatever its input and output types; public API (API report)
export type WorkflowRef = WorkflowClass | WorkflowContract<any, any> | string;
/** The input a workflow given by {@link WorkflowRef} takes. */
export type In<W> = W extends string ? unknown : WorkflowInput<W>;
/** What the caller receives for a workflow given by {@link WorkflowRef}: the run's result as stored and read back (see {@link Stored}). */
export type Out<W> = W extends string ? unknown : Stored<WorkflowOutput<W>>;
