import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { describeDiagnostics, errorLines, EXPECT_ERROR, typeCheck } from '../support/type-check';

const FIXTURE = resolve(join(__dirname, 'fixtures', 'contract-types.fixture.ts'));

jest.setTimeout(120_000);

describe('contract and Stored types', () => {
  const original = readFileSync(FIXTURE, 'utf8');
  const lines = original.split('\n');
  const directiveLines = lines.flatMap((line, index) => (EXPECT_ERROR.test(line) ? [index] : []));
  let first: ts.Program;

  it('the fixture has its @ts-expect-error cases', () => {
    expect(directiveLines.length).toBeGreaterThanOrEqual(11);
    expect(original).toMatch(/\/\/ @ts-expect-error.*\n@Workflow\(OrderFulfil\)\nexport class WrongInputWorkflow/);
    expect(original).toMatch(/\/\/ @ts-expect-error.*\n\s*const date: string = await ctx\.step\('date'/);
  });

  it('compiles with zero diagnostics (so every @ts-expect-error is a genuine error)', () => {
    const { diagnostics, program } = typeCheck(FIXTURE, original);
    first = program;
    expect(describeDiagnostics(diagnostics)).toBe('');
  });

  it('reports an error on each guarded line once its directive is removed, and nowhere else', () => {
    const stripped = lines.map((line, index) => (directiveLines.includes(index) ? '' : line)).join('\n');
    const { diagnostics } = typeCheck(FIXTURE, stripped, first);
    expect(errorLines(FIXTURE, diagnostics)).toEqual(directiveLines.map((line) => line + 1));
    expect(diagnostics.every((d) => d.file && resolve(d.file.fileName) === FIXTURE)).toBe(true);
  });

  it('the Stored equalities are not vacuous: a wrong one is reported', () => {
    const broken = original.replace(
      'Eq<Stored<Map<string, Money>>, Map<string, { amount: number; currency: string }>>,',
      'Eq<Stored<Map<string, Money>>, Map<string, Money>>,',
    );
    expect(broken).not.toBe(original);
    const { diagnostics } = typeCheck(FIXTURE, broken, first);
    expect(describeDiagnostics(diagnostics)).toMatch(/not assignable to type 'true'|Type 'true' is not assignable to type 'false'/);
  });

  it('the decorator check is not vacuous: a wider-input workflow breaks once it narrows', () => {
    const broken = original.replace(
      'async run(input: { orderId: string | number }): Promise<OrderResult>',
      'async run(input: { orderId: boolean }): Promise<OrderResult>',
    );
    expect(broken).not.toBe(original);
    const { diagnostics } = typeCheck(FIXTURE, broken, first);
    expect(describeDiagnostics(diagnostics)).toMatch(/decorator/i);
  });
});
