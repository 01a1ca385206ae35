import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brokenLinks, headingAnchors } from '../support/markdown-links';

/** Every relative link and anchor of the README, the changelog, CONTRIBUTING.md and docs/ points somewhere. */
const ROOT = join(__dirname, '..', '..');
const DOCS = [
  'README.md',
  'CHANGELOG.md',
  'CONTRIBUTING.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

describe('links in the docs', () => {
  it('README, CHANGELOG and docs/*.md: every relative link reaches a file, every anchor a heading', () => {
    expect(brokenLinks(ROOT, DOCS)).toEqual([]);
  });

  it('fails on a deliberate break: a missing file, a missing anchor (and ignores code)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'links-'));
    writeFileSync(join(dir, 'b.md'), '# Getting started\n\n## Step `one`, two\n\n## Step one, two\n');
    writeFileSync(
      join(dir, 'a.md'),
      [
        '# A',
        '[ok](b.md#getting-started) [ok](b.md#step-one-two) [ok](b.md#step-one-two-1) [ok](#a) [web](https://example.com/x#y)',
        '[gone](c.md) [no anchor](b.md#nope) [self](#missing)',
        '```md',
        '[in code](nowhere.md)',
        '```',
        '`[inline](nowhere.md)`',
      ].join('\n'),
    );
    expect(brokenLinks(dir, ['a.md']).map((link) => [link.line, link.target])).toEqual([
      [3, 'c.md'],
      [3, 'b.md#nope'],
      [3, '#missing'],
    ]);
  });

  it('slugs headings as GitHub does', () => {
    expect([
      ...headingAnchors('# Caps, groups and fairness\n## `RunInfo<Out>`\n## Dedupe: debounce and throttle per key\n## A\n## A'),
    ]).toEqual(['caps-groups-and-fairness', 'runinfoout', 'dedupe-debounce-and-throttle-per-key', 'a', 'a-1']);
  });
});
