/**
 * Compiles the ```ts blocks of the Markdown files named (default: README.md, CONTRIBUTING.md and
 * docs/*.md) against the package, as test/unit/docs-snippets.spec.ts does, and prints each error
 * at its line: `npx ts-node --transpile-only test/support/check-doc-snippets.ts docs/schedules.md`.
 */
import { mkdirSync, mkdtempSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { compileSnippets, typescriptSnippets } from './markdown-snippets';

const root = join(__dirname, '..', '..');
const files = process.argv.slice(2);
if (files.length === 0) {
  files.push('README.md', 'CONTRIBUTING.md');
  for (const name of readdirSync(join(root, 'docs'))) if (name.endsWith('.md')) files.push(`docs/${name}`);
}
const snippets = typescriptSnippets(root, files);
mkdirSync(join(root, 'node_modules', '.cache'), { recursive: true });
const errors = compileSnippets(root, snippets, mkdtempSync(join(root, 'node_modules', '.cache', 'docs-snippets-')));
for (const error of errors) console.log(`${error.file}:${error.line}: ${error.message}`);
console.log(`${snippets.length} snippets in ${files.length} files, ${errors.length} errors`);
process.exitCode = errors.length > 0 ? 1 : 0;
