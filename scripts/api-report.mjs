#!/usr/bin/env node
/**
 * The public API surface of the package, as API Extractor reports (api/*.api.md), one per entry
 * point of package.json `exports`: `nest-sluice`, `nest-sluice/testing`, `nest-sluice/dashboard`.
 *
 *   node scripts/api-report.mjs           check: exit 1 with a diff when the API differs from api/
 *   node scripts/api-report.mjs --update  accept: rewrite api/*.api.md (`npm run api:update`)
 *
 * The reports are the contract a refactor must keep: a type that moves file keeps its report line,
 * a type that changes shape (a member, a parameter, an export added or gone) does not. They are
 * built from declarations only (tsc --emitDeclarationOnly into a scratch folder inside the repo, so
 * the declarations resolve @nestjs/*, ioredis… from node_modules), so the check needs no Redis and
 * no build of dist/.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const { Extractor, ExtractorConfig, ExtractorLogLevel } = require('@microsoft/api-extractor');

/** One report per package entry point; the file name is the report's name in api/. */
const ENTRIES = [
  { entry: 'index.d.ts', report: 'sluice' },
  { entry: 'testing/index.d.ts', report: 'sluice-testing' },
  { entry: 'dashboard/index.d.ts', report: 'sluice-dashboard' },
];
/**
 * Exported classes that only Nest's injector constructs: their constructor parameters are internal
 * collaborators (connections, registry, scripts…), not API, and the client/worker refactors change
 * them freely. Their constructors are left out of the declarations before the report is made, so
 * the report does not pull those internals in.
 */
const NEST_CONSTRUCTED = ['QueueClient', 'QueueAdmin', 'QueueSchedules', 'QueueHealth'];
const REPORT_DIR = join(root, 'api');
const UPDATE_HINT = 'If the change is deliberate, accept it with `npm run api:update` and commit api/*.api.md.';

const update = process.argv.includes('--update');
// Inside the repo (gitignored), not the OS temp dir: the declarations import from node_modules.
mkdirSync(join(root, '.api-build'), { recursive: true });
const scratch = mkdtempSync(join(root, '.api-build', 'run-'));

try {
  emitDeclarations(join(scratch, 'dts'));
  dropInjectedConstructors(join(scratch, 'dts'));
  const changed = [];
  for (const { entry, report } of ENTRIES) {
    const actual = extract(join(scratch, 'dts', entry), report, join(scratch, 'reports'));
    const file = join(REPORT_DIR, `${report}.api.md`);
    const expected = existsSync(file) ? readFileSync(file, 'utf8') : '';
    if (actual === expected) continue;
    if (update) {
      mkdirSync(REPORT_DIR, { recursive: true });
      writeFileSync(file, actual);
      console.log(`api-report: wrote ${relative(root, file)}`);
    } else {
      changed.push(`--- ${relative(root, file)} (committed)\n+++ ${report}.api.md (from lib/ now)\n${lineDiff(expected, actual)}`);
    }
  }
  if (changed.length > 0) {
    console.log(`The public API changed (${changed.length} of ${ENTRIES.length} entry points):\n\n${changed.join('\n')}\n${UPDATE_HINT}`);
    process.exitCode = 1;
  } else if (!update) {
    console.log('api-report: the public API matches api/*.api.md');
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

/** The declarations of lib/ as the build emits them (tsconfig.build.json), without the JavaScript. */
function emitDeclarations(outDir) {
  const tsc = require.resolve('typescript/bin/tsc');
  const args = [
    '-p',
    join(root, 'tsconfig.build.json'),
    '--emitDeclarationOnly',
    '--outDir',
    outDir,
    '--sourceMap',
    'false',
    '--declarationMap',
    'false',
  ];
  try {
    execFileSync(process.execPath, [tsc, ...args], { cwd: root, stdio: 'pipe' });
  } catch (error) {
    throw new Error(`api-report: tsc failed\n${error.stdout ?? ''}${error.stderr ?? ''}`);
  }
}

/** Removes the constructor of each NEST_CONSTRUCTED class from the emitted declarations. */
function dropInjectedConstructors(dir) {
  const left = new Set(NEST_CONSTRUCTED);
  for (const name of readdirSync(dir, { recursive: true })) {
    if (!name.endsWith('.d.ts')) continue;
    const file = join(dir, name);
    let text = readFileSync(file, 'utf8');
    for (const cls of left) {
      const head = text.indexOf(`export declare class ${cls} `);
      if (head < 0) continue;
      const start = text.indexOf('constructor(', head);
      const bodyEnd = text.indexOf('\n}', head);
      if (start < 0 || start > bodyEnd) throw new Error(`api-report: ${cls} (${name}) has no constructor to leave out`);
      // The parameter list may hold nested parentheses (function types): find its closing one.
      let depth = 0;
      let end = start + 'constructor'.length;
      do {
        if (text[end] === '(') depth++;
        else if (text[end] === ')') depth--;
        end++;
      } while (depth > 0);
      if (text[end] !== ';') throw new Error(`api-report: unexpected constructor declaration in ${cls} (${name})`);
      text = text.slice(0, start) + text.slice(end + 1);
      left.delete(cls);
    }
    writeFileSync(file, text);
  }
  if (left.size > 0) throw new Error(`api-report: NEST_CONSTRUCTED classes not found: ${[...left].join(', ')}`);
}

/** Runs API Extractor on one entry point's declarations and returns the report it wrote. */
function extract(entryPoint, report, reportDir) {
  const config = ExtractorConfig.prepare({
    configObject: {
      projectFolder: root,
      mainEntryPointFilePath: entryPoint,
      compiler: {
        overrideTsconfig: {
          compilerOptions: {
            target: 'ES2022',
            module: 'commonjs',
            moduleResolution: 'node',
            lib: ['ES2022'],
            types: ['node'],
            strict: true,
            skipLibCheck: true,
          },
          files: [entryPoint],
        },
      },
      // Both folders are scratch: the comparison with api/ is done here, to print one diff for all entries.
      apiReport: {
        enabled: true,
        includeForgottenExports: true,
        reportFileName: `${report}.api.md`,
        reportFolder: reportDir,
        reportTempFolder: reportDir,
      },
      docModel: { enabled: false },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      messages: {
        // Documentation findings (ae-undocumented, ae-unresolved-link, no release tags: everything
        // exported is public) are not API changes. A type reachable from the API but not exported
        // stays visible in the report (ae-forgotten-export), since its shape is part of the API.
        extractorMessageReporting: {
          default: { logLevel: 'none', addToApiReportFile: false },
          'ae-forgotten-export': { logLevel: 'none', addToApiReportFile: true },
        },
        // TSDoc syntax is a lint concern, not an API change.
        tsdocMessageReporting: { default: { logLevel: 'none' } },
        compilerMessageReporting: { default: { logLevel: 'warning' } },
      },
    },
    configObjectFullPath: undefined,
    packageJsonFullPath: join(root, 'package.json'),
  });
  const warnings = [];
  const result = Extractor.invoke(config, {
    localBuild: true,
    showVerboseMessages: false,
    messageCallback: (message) => {
      if (message.logLevel === ExtractorLogLevel.Warning || message.logLevel === ExtractorLogLevel.Error)
        warnings.push(message.formatMessageWithLocation(root));
      message.handled = true;
    },
  });
  if (!result.succeeded || warnings.length > 0) {
    throw new Error(`api-report: API Extractor failed on ${relative(root, entryPoint)}:\n${warnings.join('\n')}`);
  }
  return readFileSync(join(reportDir, `${report}.api.md`), 'utf8');
}

/** A unified-style diff of two texts by lines (longest common subsequence), with 3 lines of context. */
function lineDiff(before, after) {
  const a = before.split('\n');
  const b = after.split('\n');
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const x = a.slice(start, endA);
  const y = b.slice(start, endB);
  // lcs[i][j]: length of the longest common subsequence of x[i..] and y[j..].
  const lcs = Array.from({ length: x.length + 1 }, () => new Uint32Array(y.length + 1));
  for (let i = x.length - 1; i >= 0; i--) {
    for (let j = y.length - 1; j >= 0; j--) lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  }
  const ops = a.slice(0, start).map((line) => [' ', line]);
  let i = 0;
  let j = 0;
  while (i < x.length || j < y.length) {
    if (i < x.length && j < y.length && x[i] === y[j]) {
      ops.push([' ', x[i++]]);
      j++;
    } else if (i < x.length && (j === y.length || lcs[i + 1][j] >= lcs[i][j + 1])) ops.push(['-', x[i++]]);
    else ops.push(['+', y[j++]]);
  }
  for (const line of a.slice(endA)) ops.push([' ', line]);
  // Keep changed lines and 3 lines around them; '…' marks skipped context.
  const keep = ops.map((_, k) => ops.slice(Math.max(0, k - 3), k + 4).some(([op]) => op !== ' '));
  const out = [];
  ops.forEach(([op, line], k) => {
    if (keep[k]) out.push(`${op} ${line}`);
    else if (keep[k - 1]) out.push('…');
  });
  return `${out.join('\n')}\n`;
}
