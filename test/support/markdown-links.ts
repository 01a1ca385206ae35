import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

/** A link of a Markdown file that points nowhere. */
export interface BrokenLink {
  file: string;
  line: number;
  target: string;
  reason: string;
}

/** The text of a Markdown file outside its fenced code blocks (blanked, so line numbers hold). */
function proseLines(text: string): string[] {
  let fenced = false;
  return text.split('\n').map((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return '';
    }
    // Inline code may hold text that looks like a link: not one.
    return fenced ? '' : line.replace(/`[^`]*`/g, '');
  });
}

/**
 * The anchors GitHub gives a file's headings: lowercased, punctuation but `-` and `_` dropped,
 * spaces to `-`, a repeated slug numbered `-1`, `-2`…
 */
export function headingAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const counts = new Map<string, number>();
  for (const line of proseLinesKeepingCode(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = heading[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const seen = counts.get(slug) ?? 0;
    counts.set(slug, seen + 1);
    anchors.add(seen === 0 ? slug : `${slug}-${seen}`);
  }
  return anchors;
}

/** Headings keep their inline code (GitHub slugs its text): only fenced blocks are left out. */
function proseLinesKeepingCode(text: string): string[] {
  let fenced = false;
  return text.split('\n').filter((line) => {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    return !fenced;
  });
}

/**
 * Every relative link of `files` (paths from `root`) whose file does not exist or whose `#anchor`
 * is not a heading of that file. Links to the web (`http:`, `https:`, `mailto:`) are not followed.
 */
export function brokenLinks(root: string, files: string[]): BrokenLink[] {
  const anchorsOf = new Map<string, Set<string>>();
  const anchors = (path: string) => {
    let found = anchorsOf.get(path);
    if (!found) anchorsOf.set(path, (found = headingAnchors(readFileSync(path, 'utf8'))));
    return found;
  };
  const broken: BrokenLink[] = [];
  for (const file of files) {
    const path = join(root, file);
    proseLines(readFileSync(path, 'utf8')).forEach((line, index) => {
      for (const match of line.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        const target = match[1];
        if (/^(https?:|mailto:)/.test(target)) continue;
        const [pathPart, anchor] = target.split('#', 2);
        const targetPath = pathPart === '' ? path : join(dirname(path), decodeURIComponent(pathPart));
        const at = { file, line: index + 1, target };
        if (!existsSync(targetPath)) broken.push({ ...at, reason: `no file ${relative(root, targetPath)}` });
        else if (anchor !== undefined && targetPath.endsWith('.md') && !anchors(targetPath).has(decodeURIComponent(anchor)))
          broken.push({ ...at, reason: `no heading #${anchor} in ${relative(root, targetPath)}` });
      }
    });
  }
  return broken;
}
