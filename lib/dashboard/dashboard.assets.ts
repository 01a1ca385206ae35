import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Where the page's script and style ship: next to this file, in lib/ and in dist/ alike (the build copies them). */
export const ASSETS_DIR = join(__dirname, 'assets');

/**
 * The budget the two assets must stay within, uncompressed (checked by the tests). 64 KiB until
 * the triggers (groups' rate limits and filters, dedupe, batches, events) took the page past it;
 * about 20 KB gzipped either way.
 */
export const ASSET_BUDGET_BYTES = 80 * 1024;

export interface Asset {
  body: string;
  type: string;
  etag: string;
}

const TYPES: Record<string, string> = { 'dashboard.js': 'text/javascript; charset=utf-8', 'dashboard.css': 'text/css; charset=utf-8' };

/** The dashboard's only two assets, read once: nothing comes from a CDN, the page works offline. */
export function loadAssets(dir = ASSETS_DIR): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const [name, type] of Object.entries(TYPES)) {
    const body = readFileSync(join(dir, name), 'utf8');
    assets.set(name, { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` });
  }
  return assets;
}

/**
 * The page: a shell that loads the script, which draws everything from the JSON API. URLs are
 * absolute from `basePath` (no `<base>`: the page's own `#/…` links must stay on the page); the
 * script reads `base` from its config for the API. (On Fastify only the path without a trailing
 * slash is routed, unless the app sets `ignoreTrailingSlash`.)
 */
export function pageHtml(basePath: string, config: { readOnly: boolean; pollMs: number }): string {
  const base = escapeAttribute(basePath);
  return [
    '<!doctype html><html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width,initial-scale=1">',
    `<meta name="sluice-config" content="${escapeAttribute(JSON.stringify({ ...config, base: basePath }))}">`,
    // An empty icon: no request for /favicon.ico, outside the mount path.
    '<link rel="icon" href="data:,">',
    `<title>Sluice</title><link rel="stylesheet" href="${base}assets/dashboard.css"></head>`,
    `<body><div id="app"></div><script src="${base}assets/dashboard.js" defer></script></body></html>`,
  ].join('');
}

/**
 * The request's path as the page's base (it already holds the app's global prefix and the mount
 * path), with a trailing slash. Only the path: a request target in absolute form
 * (`GET http://elsewhere/sluice`) must not point the page's script at another host.
 */
export function basePathOf(url: string): string {
  let path: string;
  try {
    path = new URL(url, 'http://localhost').pathname;
  } catch {
    path = '/';
  }
  return path.endsWith('/') ? path : `${path}/`;
}

function escapeAttribute(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}
