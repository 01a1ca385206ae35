/**
 * Which classes declare `@Step` methods and which are `@Workflow`s, as the decorators note them:
 * what decides whether a run enters the run scope (lib/workflow/run.scope.ts), so a run that
 * cannot call a `@Step` method pays nothing for it.
 */

/** Classes that declare `@Step` methods (see {@link noteStepMethod}). */
const stepClasses = new Set<object>();
/** Classes declared `@Workflow` (see {@link noteWorkflowClass}). */
const workflowClasses = new WeakSet<object>();
/** Whether some `@Step` class is not a `@Workflow` class (a service of steps): undefined until asked again after a class was noted. */
let foreignSteps: boolean | undefined = false;
/** Per prototype of a workflow instance: whether its runs enter the scope; cleared when a class is noted. */
let decisions = new WeakMap<object, boolean>();

function forgetDecisions(): void {
  foreignSteps = undefined;
  decisions = new WeakMap();
}

/** Called by `@Step` as it decorates a method of `owner` (the class, for a static method the class itself). */
export function noteStepMethod(owner: object): void {
  if (stepClasses.has(owner)) return;
  stepClasses.add(owner);
  forgetDecisions();
}

/** Called by `@Workflow` as it decorates a class. */
export function noteWorkflowClass(workflowClass: object): void {
  workflowClasses.add(workflowClass);
  forgetDecisions();
}

/**
 * Whether a run of `instance` enters the run scope: when a class of its prototype chain declares
 * `@Step` methods, or when any class that is not a `@Workflow` declares one (a service of steps
 * any run may call). A `@Step` method of another `@Workflow` class is no step of this run's.
 */
export function needsRunScope(instance: object): boolean {
  if (stepClasses.size === 0) return false;
  foreignSteps ??= [...stepClasses].some((owner) => !workflowClasses.has(owner));
  if (foreignSteps) return true;
  const prototype = Object.getPrototypeOf(instance) as object | null;
  if (!prototype) return false;
  let needs = decisions.get(prototype);
  if (needs === undefined) {
    needs = false;
    for (let p: object | null = prototype; p && p !== Object.prototype; p = Object.getPrototypeOf(p) as object | null) {
      if (stepClasses.has((p as { constructor: object }).constructor)) needs = true;
    }
    decisions.set(prototype, needs);
  }
  return needs;
}
