import 'reflect-metadata';
import {
  defineWorkflow,
  InvalidNameError,
  InvalidOptionError,
  isWorkflowContract,
  jsonify,
  roundTrip,
  PayloadNotSerializableError,
  Workflow,
  WORKFLOW_CONTRACT,
} from '../../lib';
import { WorkflowMetadataAccessor } from '../../lib/discovery/workflow-metadata.accessor';

const accessor = new WorkflowMetadataAccessor();

describe('defineWorkflow', () => {
  it('makes a small frozen object carrying the name (and attempts when given)', () => {
    const contract = defineWorkflow<{ a: string }, number>('contract.one', { attempts: 5 });
    expect(contract).toEqual({ [WORKFLOW_CONTRACT]: true, name: 'contract.one', attempts: 5 });
    expect(Object.isFrozen(contract)).toBe(true);
    expect(isWorkflowContract(contract)).toBe(true);
    expect(defineWorkflow('contract.two')).toEqual({ [WORKFLOW_CONTRACT]: true, name: 'contract.two' });
  });

  it('is recognised only by its marker, which is shared across copies of the package (Symbol.for)', () => {
    expect(WORKFLOW_CONTRACT).toBe(Symbol.for('nest-sluice.workflow-contract'));
    expect(isWorkflowContract({ name: 'x' })).toBe(false);
    expect(isWorkflowContract(class Named {})).toBe(false);
    expect(isWorkflowContract(null)).toBe(false);
  });

  it('checks the name and attempts where the contract is declared', () => {
    expect(() => defineWorkflow('bad name')).toThrow(InvalidNameError);
    expect(() => defineWorkflow('bad name')).toThrow(/^defineWorkflow name: /);
    expect(() => defineWorkflow('ok', { attempts: 0 })).toThrow(InvalidOptionError);
    expect(() => defineWorkflow('ok', { attempts: 1.5 })).toThrow(/defineWorkflow\('ok'\) attempts/);
    expect(() => defineWorkflow('ok', null as never)).toThrow(InvalidOptionError);
  });
});

describe('@Workflow(contract)', () => {
  const Contract = defineWorkflow<{ n: number }, number>('contract.square', { attempts: 4 });

  it("takes the contract's name and attempts", () => {
    @Workflow(Contract, { concurrency: 2 })
    class Square {
      async run(input: { n: number }): Promise<number> {
        return input.n * input.n;
      }
    }
    expect(accessor.getWorkflow(Square)).toEqual({ name: 'contract.square', options: { concurrency: 2, attempts: 4 } });
  });

  it('accepts the same attempts again, and refuses different ones', () => {
    expect(() => Workflow(Contract, { attempts: 4 })).not.toThrow();
    expect(() => Workflow(Contract, { attempts: 2 })).toThrow(InvalidOptionError);
    expect(() => Workflow(Contract, { attempts: 2 })).toThrow(/2 differs from the contract: the contract's is 4/);
  });

  it('a contract without attempts refuses attempts on the class: producers would not know them', () => {
    expect(() => Workflow(defineWorkflow<null, string>('contract.free'), { attempts: 7 })).toThrow(
      /the contract sets none \(producers would use their default\); set attempts on defineWorkflow/,
    );
  });
});

describe('roundTrip', () => {
  class Line {
    constructor(readonly sku: string) {}
    label(): string {
      return this.sku;
    }
  }

  it('gives what a step result becomes after it is stored and read back', () => {
    const value = {
      at: new Date(Date.UTC(2026, 0, 1)),
      skip: undefined,
      list: [1, 'two'],
      nested: { buffer: Buffer.from('hi') },
      line: new Line('a'),
    };
    const out = roundTrip(value);
    expect(out).toEqual({
      at: new Date(Date.UTC(2026, 0, 1)),
      skip: undefined,
      list: [1, 'two'],
      nested: { buffer: Buffer.from('hi') },
      line: { sku: 'a' },
    });
    expect('skip' in out).toBe(true);
    expect(out.line).not.toBeInstanceOf(Line);
    expect(roundTrip(undefined)).toBeUndefined();
  });

  it('throws the error a step result would, naming the path', () => {
    expect(() => roundTrip({ items: [1, new WeakMap()] })).toThrow(PayloadNotSerializableError);
    expect(() => roundTrip({ items: [1, new WeakMap()] })).toThrow(/^value\.items\[1\]: /);
  });

  it('is what the deprecated jsonify is', () => {
    expect(jsonify).toBe(roundTrip);
  });
});
