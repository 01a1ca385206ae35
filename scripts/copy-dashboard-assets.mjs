#!/usr/bin/env node
/**
 * Part of `npm run build`, after tsc: copies the dashboard's script and style (lib/dashboard/assets)
 * next to the compiled module (dist/dashboard/assets), where lib/dashboard/dashboard.assets.ts looks
 * for them. tsc copies only what it compiles.
 */
import { cpSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const from = join(root, 'lib', 'dashboard', 'assets');
if (!existsSync(from)) {
  console.error(`copy-dashboard-assets: ${from} is missing`);
  process.exit(1);
}
cpSync(from, join(root, 'dist', 'dashboard', 'assets'), { recursive: true });
