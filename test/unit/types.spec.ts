import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { describeDiagnostics, EXPECT_ERROR as DIRECTIVE, typeCheck } from '../support/type-check';

const FIXTURE = join(__dirname, 'fixtures', 'run-types.fixture.ts');

jest.setTimeout(120_000);

/** Type-checks the fixture with `source` as its text; returns every diagnostic of the program. */
const check = (source: string, oldProgram?: ts.Program) => typeCheck(FIXTURE, source, oldProgram);

describe('client.run type inference', () => {
  const original = readFileSync(FIXTURE, 'utf8');
  const lines = original.split('\n');
  const directiveLines = lines.flatMap((line, index) => (DIRECTIVE.test(line) ? [index] : []));
  let first: ts.Program;

  it('the fixture has the expected @ts-expect-error cases', () => {
    expect(directiveLines.length).toBeGreaterThanOrEqual(2);
    expect(original).toMatch(/\/\/ @ts-expect-error.*\n\s*await client\.run\(TypedOrderWorkflow, \{ orderId: 1 \}\);/);
    expect(original).toMatch(/\/\/ @ts-expect-error.*\n\s*const n: number = await client\.run\(TypedOrderWorkflow, \{ orderId: 'x' \}\);/);
    expect(original).toMatch(/const out: \{ invoiceId: string \} = await client\.run\(TypedOrderWorkflow, \{ orderId: 'x' \}\);/);
  });

  it('compiles with zero diagnostics (so every @ts-expect-error is a genuine error)', () => {
    const { diagnostics, program } = check(original);
    first = program;
    expect(program.getSourceFile(FIXTURE)).toBeDefined();
    expect(describeDiagnostics(diagnostics)).toBe('');
    expect(diagnostics).toHaveLength(0);
  });

  it('reports an error on each line once its @ts-expect-error directive is removed', () => {
    // Replace each directive by an empty line, so line numbers stay put.
    const stripped = lines.map((line, index) => (directiveLines.includes(index) ? '' : line)).join('\n');
    const { diagnostics } = check(stripped, first);
    const inFixture = diagnostics.filter((d) => d.file && resolve(d.file.fileName) === FIXTURE);
    expect(inFixture).toHaveLength(diagnostics.length); // nothing outside the fixture breaks
    const errorLines = new Set(inFixture.map((d) => d.file!.getLineAndCharacterOfPosition(d.start!).line));
    // Each directive guards the line after it; every guarded line must now be an error, and nothing else.
    expect([...errorLines].sort((a, b) => a - b)).toEqual(directiveLines.map((line) => line + 1));
    expect(inFixture.every((d) => d.category === ts.DiagnosticCategory.Error)).toBe(true);
  });

  it('a wrong annotation on an unguarded line is reported (the check is not vacuous)', () => {
    const broken = original.replace(
      "const out: { invoiceId: string } = await client.run(TypedOrderWorkflow, { orderId: 'x' });",
      "const out: { invoiceId: number } = await client.run(TypedOrderWorkflow, { orderId: 'x' });",
    );
    expect(broken).not.toBe(original);
    const { diagnostics } = check(broken, first);
    expect(describeDiagnostics(diagnostics)).toMatch(/invoiceId/);
  });
});
