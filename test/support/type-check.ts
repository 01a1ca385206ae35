import { dirname, join, resolve } from 'node:path';
import ts from 'typescript';

const ROOT = resolve(__dirname, '..', '..');

/** Matches a `// @ts-expect-error` directive line (the line after it must be a type error). */
export const EXPECT_ERROR = /^\s*\/\/ @ts-expect-error\b.*$/;

function compilerOptions(): ts.CompilerOptions {
  const configPath = join(ROOT, 'tsconfig.json');
  const { config, error } = ts.readConfigFile(configPath, ts.sys.readFile);
  if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'));
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, dirname(configPath));
  if (parsed.errors.length) throw new Error(parsed.errors.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('\n'));
  return { ...parsed.options, noEmit: true, sourceMap: false, declaration: false };
}

/**
 * Type-checks `fixture` (a file path) with `source` as its text, under the repository's
 * tsconfig; returns every diagnostic of the program (as test/unit/types.spec.ts does).
 */
export function typeCheck(
  fixture: string,
  source: string,
  oldProgram?: ts.Program,
): { diagnostics: readonly ts.Diagnostic[]; program: ts.Program } {
  const options = compilerOptions();
  const host = ts.createCompilerHost(options, true);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, language, onError, shouldCreate) =>
    resolve(fileName) === fixture
      ? ts.createSourceFile(fileName, source, language, true)
      : getSourceFile(fileName, language, onError, shouldCreate);
  const readFile = host.readFile.bind(host);
  host.readFile = (fileName) => (resolve(fileName) === fixture ? source : readFile(fileName));
  const program = ts.createProgram({ rootNames: [fixture], options, host, oldProgram });
  return { diagnostics: ts.getPreEmitDiagnostics(program), program };
}

export function describeDiagnostics(diagnostics: readonly ts.Diagnostic[]): string {
  return diagnostics
    .map((d) => {
      const where = d.file && d.start !== undefined ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}` : '';
      return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
    })
    .join('\n');
}

/** Line numbers (0-based) of the diagnostics in `fixture`. */
export function errorLines(fixture: string, diagnostics: readonly ts.Diagnostic[]): number[] {
  const lines = diagnostics
    .filter((d) => d.file && resolve(d.file.fileName) === fixture)
    .map((d) => d.file!.getLineAndCharacterOfPosition(d.start!).line);
  return [...new Set(lines)].sort((a, b) => a - b);
}
