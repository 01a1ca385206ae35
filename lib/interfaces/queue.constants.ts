/** DI token of the raw options given to `forRoot`/returned by the `forRootAsync` factory. */
export const QUEUE_MODULE_OPTIONS = Symbol('SLUICE_QUEUE_MODULE_OPTIONS');
/** DI token of the validated options with defaults filled in. */
export const RESOLVED_QUEUE_OPTIONS = Symbol('SLUICE_RESOLVED_QUEUE_OPTIONS');

export const WORKFLOW_METADATA = 'sluice:workflow';
export const STEP_METADATA = 'sluice:steps';
