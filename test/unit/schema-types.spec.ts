import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { describeDiagnostics, errorLines, EXPECT_ERROR, typeCheck } from '../support/type-check';

const FIXTURE = resolve(join(__dirname, 'fixtures', 'schema-types.fixture.ts'));

jest.setTimeout(120_000);

describe('Standard Schema types: contracts, client and @Workflow classes', () => {
  const original = readFileSync(FIXTURE, 'utf8');
  const lines = original.split('\n');
  const directiveLines = lines.flatMap((line, index) => (EXPECT_ERROR.test(line) ? [index] : []));
  let first: ts.Program;

  it('the fixture has its @ts-expect-error cases', () => {
    expect(directiveLines.length).toBeGreaterThanOrEqual(8);
    expect(original).toMatch(/\/\/ @ts-expect-error.*\n@Workflow\('types\.schema\.narrow'/);
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
  });

  it('the expectTypeOf checks are not vacuous: a wrong expectation is reported', () => {
    const broken = original.replace(
      'expectTypeOf<WorkflowOutput<typeof Order>>().toEqualTypeOf<OutputOut>();',
      'expectTypeOf<WorkflowOutput<typeof Order>>().toEqualTypeOf<OutputIn>();',
    );
    expect(broken).not.toBe(original);
    const { diagnostics } = typeCheck(FIXTURE, broken, first);
    expect(describeDiagnostics(diagnostics)).not.toBe('');
  });
});
