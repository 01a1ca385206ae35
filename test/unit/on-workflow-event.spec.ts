import 'reflect-metadata';
import { InvalidNameError, InvalidOptionError, OnWorkflowEvent, RunFailedEvent, RunOutcomeEvent, RunStalledEvent, Step } from '../../lib';
import { WorkflowEventAccessor } from '../../lib/discovery/workflow-event.accessor';

describe('@OnWorkflowEvent (metadata and checks, no app)', () => {
  const accessor = new WorkflowEventAccessor();

  it('records one entry per decorator, on the prototype and key (so a wrapping decorator cannot lose it)', () => {
    class Listener {
      @OnWorkflowEvent('completed')
      @OnWorkflowEvent('failed', { workflow: 'order.fulfil' })
      onOutcome(_event: RunOutcomeEvent): void {}

      @OnWorkflowEvent('stalled', { workflow: ['a', 'b'] })
      @Step()
      wrapped(_event: RunStalledEvent): void {}

      plain(): void {}
    }
    expect(accessor.getHandlers(Listener.prototype, 'onOutcome')).toEqual([
      { event: 'failed', workflows: ['order.fulfil'] },
      { event: 'completed' },
    ]);
    expect(accessor.getHandlers(Listener.prototype, 'wrapped')).toEqual([{ event: 'stalled', workflows: ['a', 'b'] }]);
    expect(accessor.getHandlers(Listener.prototype, 'plain')).toEqual([]);

    class Child extends Listener {}
    expect(accessor.getHandlers(Child.prototype, 'onOutcome')).toHaveLength(2);
    // The explorer reads method metadata only of classes that declare (or inherit) a handler.
    class Unrelated {
      plain(): void {}
    }
    expect([Listener, Child, Unrelated].map((cls) => accessor.declaresHandlers(cls.prototype))).toEqual([true, true, false]);
  });

  it('refuses an unknown event, a bad workflow filter, and a non-method, when the class is declared', () => {
    expect(() => OnWorkflowEvent('done' as never)).toThrow(
      new InvalidOptionError(
        '@OnWorkflowEvent event',
        `must be one of 'active', 'completed', 'failed', 'retrying', 'stalled', 'suspended', got "done"`,
      ),
    );
    expect(() => OnWorkflowEvent('failed', { workflow: [] })).toThrow(InvalidOptionError);
    expect(() => OnWorkflowEvent('failed', { workflow: 'has space' })).toThrow(InvalidNameError);
    expect(() => OnWorkflowEvent('failed', { workflow: ['ok', 'bad:name'] })).toThrow('@OnWorkflowEvent options.workflow[1]');
    const decorate = OnWorkflowEvent('completed');
    expect(() => decorate({}, 'field', { value: 42 } as never)).toThrow(TypeError);
    class WithStatic {
      static onDone(): void {}
    }
    expect(() => decorate(WithStatic, 'onDone', { value: WithStatic.onDone })).toThrow('not the static WithStatic.onDone');
  });

  it("checks the handler's parameter against the event's payload at compile time", () => {
    class Typed {
      @OnWorkflowEvent('failed')
      ok(event: RunFailedEvent): boolean {
        return event.willRetry;
      }

      @OnWorkflowEvent('retrying')
      // A wider parameter type is fine: a retrying event is a failed event.
      wide(_event: RunFailedEvent): void {}

      @OnWorkflowEvent('completed')
      none(): void {}

      // @ts-expect-error a stalled event has no attempt number to offer a string parameter
      @OnWorkflowEvent('stalled')
      wrong(_event: string): void {}
    }
    expect(new Typed().ok({ willRetry: true } as RunFailedEvent)).toBe(true);
  });
});
