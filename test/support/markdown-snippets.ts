import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as ts from 'typescript';

/** One TypeScript code block of a Markdown file, as a module of its own. */
export interface Snippet {
  /** The Markdown file, relative to the root it was read from. */
  file: string;
  /** Line (1-based) of the block's first code line in that file. */
  line: number;
  code: string;
}

/** A compiler error in a snippet, placed at its line in the Markdown file. */
export interface SnippetError {
  file: string;
  line: number;
  message: string;
}

/**
 * Every block fenced as ```ts or ```typescript in `files`. A block whose info string also says
 * `continued` (```ts continued) is the rest of the block before it in that file: the two compile as
 * one module, so a page can show a class, then how it is used, without repeating its imports.
 */
export function typescriptSnippets(root: string, files: string[]): Snippet[] {
  const snippets: Snippet[] = [];
  for (const file of files) {
    const lines = readFileSync(join(root, file), 'utf8').split('\n');
    let open: { line: number; code: string[]; continued: boolean } | undefined;
    let fenced = false;
    for (let i = 0; i < lines.length; i++) {
      const fence = /^\s*(```|~~~)\s*([\w-]*)\s*(.*)$/.exec(lines[i]);
      if (fence && !fenced) {
        fenced = true;
        if (fence[2] === 'ts' || fence[2] === 'typescript') open = { line: i + 2, code: [], continued: /\bcontinued\b/.test(fence[3]) };
      } else if (fence && fenced && fence[2] === '') {
        fenced = false;
        if (open) {
          const previous = snippets[snippets.length - 1];
          if (open.continued && previous?.file === file) {
            // Blank lines keep the continued block's lines where the compiler reports them.
            const lastLine = previous.line + previous.code.split('\n').length - 1;
            previous.code += '\n'.repeat(open.line - lastLine) + open.code.join('\n');
          } else {
            snippets.push({ file, line: open.line, code: open.code.join('\n') });
          }
        }
        open = undefined;
      } else if (open) {
        open.code.push(lines[i]);
      }
    }
  }
  return snippets;
}

/**
 * Compiles each snippet as a module of its own (a block opening with a `// <path>.ts` line is that
 * file of the app its page builds, beside the page's other such files) against the package's sources: `nest-sluice`,
 * `nest-sluice/testing` and `nest-sluice/dashboard` resolve to lib/, everything else as the
 * project resolves it (its installed dependencies, so `workDir` must be inside the project; the
 * globals of Node and Jest are there, for pages about tests). The project's strict options apply, with top
 * level `await` allowed and unused names tolerated (a snippet shows a piece of an app). Returns
 * each error at its line in its Markdown file.
 */
export function compileSnippets(root: string, snippets: Snippet[], workDir: string): SnippetError[] {
  mkdirSync(workDir, { recursive: true });
  const errors: SnippetError[] = [];
  const sources = snippets.map((snippet, i) => {
    // A block that opens with `// <path>.ts` is that file of an app the page builds: written there,
    // in a directory of the page's own, so the page's other files import it by relative path.
    const named = /^\/\/ ([\w./-]+\.ts)\b/.exec(snippet.code)?.[1];
    const path = join(workDir, snippet.file.replace(/[^\w.-]/g, '_'), named ?? `snippet-${i}.ts`);
    mkdirSync(dirname(path), { recursive: true });
    // `export {}` makes a block without imports a module too, so blocks never share names.
    const text = `${snippet.code}\nexport {};\n`;
    writeFileSync(path, text);
    try {
      ts.createSourceFile(path, text, ts.ScriptTarget.ES2022);
    } catch (error) {
      // TypeScript's parser asserts on some malformed code (a decorator before `await`) instead
      // of reporting it: such a block is an error, and left out of the program it would crash.
      errors.push({ file: snippet.file, line: snippet.line, message: `does not parse: ${(error as Error).message}` });
      return undefined;
    }
    return path;
  });
  const parsed = sources.filter((path): path is string => path !== undefined);
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ['lib.es2022.d.ts'],
    strict: true,
    noImplicitOverride: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    esModuleInterop: true,
    skipLibCheck: true,
    noEmit: true,
    types: ['node', 'jest'],
    typeRoots: [join(root, 'node_modules', '@types')],
    baseUrl: root,
    paths: {
      'nest-sluice': ['lib/index.ts'],
      'nest-sluice/testing': ['lib/testing/index.ts'],
      'nest-sluice/dashboard': ['lib/dashboard/index.ts'],
    },
  };
  const program = ts.createProgram(parsed, options);
  for (const diagnostic of ts.getPreEmitDiagnostics(program)) {
    const index = diagnostic.file ? sources.indexOf(diagnostic.file.fileName) : -1;
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    if (index < 0) {
      // An error outside the snippets (lib/ itself, the options): reported as is.
      errors.push({ file: diagnostic.file?.fileName ?? '(options)', line: 0, message });
      continue;
    }
    const { line } = diagnostic.file!.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
    errors.push({ file: snippets[index].file, line: snippets[index].line + line, message });
  }
  return errors;
}
