import { STEP_METADATA } from '../interfaces/queue.constants';
import { InvalidOptionError } from '../errors';
import { checkId } from '../util/names';
import { runScope } from '../workflow/run.scope';
import { noteStepMethod } from '../workflow/step-classes.registry';
import { resolveStepOptions, STEP_CALL_OPTIONS, type StepCallOptions } from '../workflow/step.options';
import { checkOptionKeys } from '../util/option-keys';

/** Options of `@Step`: its memo key, plus how it executes (time limit, tries; see {@link StepCallOptions}). */
export interface StepOptions extends StepCallOptions {
  /** Memo key of the step; defaults to the method name. Renaming it makes finished steps run again on retry. */
  name?: string;
}

/**
 * Makes a method of a `@Workflow` class (or of a service its runs call) a durable step: inside a
 * run, each call (name plus occurrence) executes at most once and its result is persisted before
 * the call returns; a retried run gets the persisted result back without executing. Outside a run
 * the method simply runs, so it stays unit-testable; so does a `@Step` method of another
 * `@Workflow` class called from a run (put steps several workflows share in a service). Arguments
 * do not take part in the memo key — a step's identity is its position in the run, so keep the
 * run's control flow deterministic.
 *
 * A step called inside another step (at any depth, through `@Step` or `ctx.step`) is not a step
 * of its own: it runs plainly as part of its parent, takes no occurrence number, is not memoized
 * on its own, and its result is covered by the parent's memo — a retry that replays the parent
 * does not call it at all. Steps started side by side at the top level of `run` (e.g. in
 * `Promise.all`) are each a memoized step.
 *
 * A result that would take the run's whole step memo over `maxRunMemoBytes` throws
 * `StepMemoLimitError`, which fails the run without retry.
 *
 * `timeoutMs`, `attempts` and `backoff` bound each call and retry it in place (see
 * {@link StepCallOptions}); they are checked here, when the class is defined
 * (`InvalidOptionError`), apply only inside a run, and are ignored when the method runs nested
 * in another step. The method's arguments are its caller's, so it has no step signal of its own:
 * it can watch `ctx.signal`, which aborts on its final time limit.
 */
export function Step(options: StepOptions = {}): MethodDecorator {
  return (target, propertyKey, descriptor: PropertyDescriptor) => {
    if (options === null || typeof options !== 'object')
      throw new InvalidOptionError(`@Step ${String(propertyKey)}`, 'must be an object { name?, timeoutMs?, attempts?, backoff? }');
    checkOptionKeys(options, ['name', ...STEP_CALL_OPTIONS], `@Step ${String(propertyKey)}`);
    const name = checkId(options.name ?? String(propertyKey), `@Step name of ${String(propertyKey)}`);
    const { name: _name, ...callOptions } = options;
    const execution = resolveStepOptions(callOptions, `@Step ${String(propertyKey)}`);
    const original = descriptor.value as (...args: unknown[]) => unknown;
    if (typeof original !== 'function') throw new TypeError(`@Step() must decorate a method, not ${String(propertyKey)}`);
    descriptor.value = function stepped(this: unknown, ...args: unknown[]) {
      const run = runScope.getStore();
      return run ? run.step(name, () => original.apply(this, args), execution) : original.apply(this, args);
    };
    Object.defineProperty(descriptor.value, 'name', { value: original.name });
    noteStepMethod(typeof target === 'function' ? target : target.constructor);
    const steps = (Reflect.getMetadata(STEP_METADATA, target.constructor) as string[] | undefined) ?? [];
    Reflect.defineMetadata(STEP_METADATA, [...steps, name], target.constructor);
  };
}
