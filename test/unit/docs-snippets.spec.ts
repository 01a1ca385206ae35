import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { compileSnippets, typescriptSnippets } from '../support/markdown-snippets';

/**
 * Every code block marked as TypeScript in the README, CONTRIBUTING.md and docs/ compiles
 * against the package as it is: an example that no longer matches the API fails here.
 */
const ROOT = join(__dirname, '..', '..');

/** Markdown files under `dir`, recursively, but the generated API reference (docs/api). */
function markdownUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'api' ? [] : markdownUnder(path);
    return entry.name.endsWith('.md') ? [relative(ROOT, path)] : [];
  });
}

const PAGES = ['README.md', 'CONTRIBUTING.md', ...markdownUnder(join(ROOT, 'docs'))];

/** A fresh directory inside the project, so the snippets' imports resolve from its node_modules. */
function workDir(): string {
  const cache = join(ROOT, 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  return mkdtempSync(join(cache, 'docs-snippets-'));
}

jest.setTimeout(180_000);

describe('TypeScript in the docs', () => {
  it('every ```ts block of the README, CONTRIBUTING.md and docs/ compiles against the package', () => {
    const snippets = typescriptSnippets(ROOT, PAGES);
    expect(snippets.length).toBeGreaterThan(0);
    const errors = compileSnippets(ROOT, snippets, workDir());
    expect(errors.map((error) => `${error.file}:${error.line}: ${error.message}`)).toEqual([]);
  });

  it('fails on a deliberate break, at the line in the Markdown file; `continued` blocks compile as one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'snippet-docs-'));
    writeFileSync(
      join(dir, 'page.md'),
      [
        '# A page', // 1
        '```ts', // 2
        "import { Workflow } from 'nest-sluice';", // 3
        "@Workflow('ok')", // 4
        'export class Ok { async run(input: { n: number }) { return input.n; } }', // 5
        '```', // 6
        'Then:', // 7
        '```ts continued', // 8
        'const n: number = new Ok().run({ n: 1 }) as unknown as number;', // 9
        "const wrong: string = 'x' as unknown as number;", // 10
        '```', // 11
        '```ts', // 12
        "import { QueueClient } from 'nest-sluice';", // 13
        'declare const client: QueueClient;', // 14
        "client.enqueueNothing('x');", // 15
        '```', // 16
        '```bash', // 17
        'this is not compiled', // 18
        '```', // 19
      ].join('\n'),
    );
    const snippets = typescriptSnippets(dir, ['page.md']);
    expect(snippets.map((snippet) => snippet.line)).toEqual([3, 13]);
    const errors = compileSnippets(ROOT, snippets, workDir());
    expect(errors.map((error) => error.line)).toEqual([10, 15]);
    expect(errors[1].message).toMatch(/enqueueNothing/);
  });
});
