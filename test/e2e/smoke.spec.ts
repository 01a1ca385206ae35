import { Injectable } from '@nestjs/common';
import { RunContext, Step, Workflow } from '../../lib';
import { createApp, TestApp, uniqueNamespace } from '../support/app';

@Injectable()
class Greeter {
  greet(name: string) {
    return `hello ${name}`;
  }
}

@Workflow('greet')
class GreetWorkflow {
  constructor(private readonly greeter: Greeter) {}
  async run(input: { name: string }, ctx: RunContext) {
    const a = await this.first(input.name);
    const b = await ctx.step('second', () => a.toUpperCase());
    return { a, b };
  }
  @Step() async first(name: string) {
    return this.greeter.greet(name);
  }
}

describe('smoke', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createApp([Greeter, GreetWorkflow], { namespace: uniqueNamespace() });
  });
  afterAll(() => t.close());

  it('runs', async () => {
    const out = await t.client.run(GreetWorkflow, { name: 'x' }, { timeoutMs: 5000 });
    expect(out).toEqual({ a: 'hello x', b: 'HELLO X' });
  });
});
