/**
 * `nest-sluice/testing`: unit-test workflows in-process, without Redis, with a worker's
 * semantics. Kept out of the package root so production bundles don't carry it.
 * @module nest-sluice/testing
 */
export { SluiceTesting } from './sluice.testing';
export { WorkflowHarness } from './workflow.harness';
export { FakeClock } from './fake.clock';
export type {
  FailStepOptions,
  HarnessAttempt,
  HarnessOptions,
  HarnessRun,
  HarnessRunOptions,
  HarnessScheduleFires,
  HarnessStepReport,
  SluiceTestingOptions,
} from './harness.types';
export { jsonify, roundTrip } from '../workflow/payload.types';
export type { Jsonified, Stored } from '../workflow/payload.types';
