import 'reflect-metadata';
import { InvalidNameError, InvalidOptionError, Workflow } from '../../lib';
import { WORKFLOW_METADATA } from '../../lib/interfaces/queue.constants';
import { isTriggerRun, MAX_EVENT_ID_LENGTH, triggerRunId } from '../../lib/workflow/trigger.options';
import { MAX_ID_LENGTH, MAX_NAME_LENGTH } from '../../lib/util/names';

/** `@Workflow({ on, filter })` is checked at the decorator, before anything runs. */
describe('@Workflow on / filter', () => {
  const declare = (options: object) => () => Workflow('tr.wf', options as never)(class {});

  it('normalizes `on` to sorted, distinct names', () => {
    class Target {}
    Workflow('tr.ok', { on: ['b.event', 'a.event', 'b.event'], filter: () => true })(Target);
    expect(Reflect.getMetadata(WORKFLOW_METADATA, Target).options.on).toEqual(['a.event', 'b.event']);
    class Single {}
    Workflow('tr.one', { on: 'x' })(Single);
    expect(Reflect.getMetadata(WORKFLOW_METADATA, Single).options.on).toEqual(['x']);
  });

  it.each([
    [{ on: 5 }, InvalidOptionError, /on: must be an event name or an array of them, got number/],
    [{ on: { a: 1 } }, InvalidOptionError, /on: must be an event name or an array/],
    [{ on: [] }, InvalidOptionError, /on: must name at least one event/],
    [{ on: ['ok', 'bad name'] }, InvalidNameError, /on\[1\]/],
    [{ on: '' }, InvalidNameError, /on: must not be empty/],
    [{ on: Array.from({ length: 101 }, (_, i) => `e${i}`) }, InvalidOptionError, /at most 100 events/],
    [{ filter: () => true, on: undefined }, InvalidOptionError, /filter: needs `on`/],
    [{ on: 'e', filter: 'yes' }, InvalidOptionError, /filter: must be a function/],
    [{ onn: 'e' }, InvalidOptionError, /did you mean `on`/],
  ])('refuses %j', (options, type, message) => {
    expect(declare(options)).toThrow(type);
    expect(declare(options)).toThrow(message);
  });

  it('derives run ids that stay valid run ids and are told apart from others', () => {
    expect(MAX_EVENT_ID_LENGTH + 'evt::'.length + MAX_NAME_LENGTH).toBe(MAX_ID_LENGTH);
    const id = triggerRunId('x'.repeat(MAX_EVENT_ID_LENGTH), 'w'.repeat(MAX_NAME_LENGTH));
    expect(id).toHaveLength(MAX_ID_LENGTH);
    expect(isTriggerRun(id)).toBe(true);
    expect(isTriggerRun('order-1')).toBe(false);
  });
});
