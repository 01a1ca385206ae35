import { SluiceError } from './sluice.error';

/** A mistake in how workflows are declared (duplicate name, missing `run`, `@Step` outside a `@Workflow`). Fails the bootstrap. */
export class WorkflowDefinitionError extends SluiceError {}

/** Invalid `QueueModule.forRoot`/`forRootAsync` options. */
export class QueueConfigError extends SluiceError {}
