/**
 * The layering of lib/ (issue 28), checked by `npm run lint:layers` (dependency-cruiser).
 *
 * Layers, bottom → top; a file imports only from its own layer or below, never up, and no import
 * cycles. Type-only imports count: a type cycle or an upward type import ties the layers together
 * just the same (all of lib's cycles at the time this was written were type-only, which
 * eslint-plugin-import-x's no-cycle does not see). client/ and worker/ never import each other.
 * lib's root files (queue.module.ts, index.ts) count as the top layer: no folder may import them,
 * so options and DI tokens live in interfaces/.
 */
const LAYERS = [
  ['util', 'errors', 'interfaces'],
  ['redis'],
  ['workflow', 'decorators', 'discovery'],
  ['execution'],
  ['client', 'worker', 'schedule', 'migration', 'telemetry'],
  ['health', 'dashboard', 'testing', 'cli'],
];
const ROOT_FILES = '^lib/[^/]+\\.ts$';
const folders = (names) => `^lib/(${names.join('|')})/`;

module.exports = {
  forbidden: [
    {
      name: 'no-cycle',
      comment: 'lib/ has no import cycles (type-only imports included).',
      severity: 'error',
      from: { path: '^lib/' },
      to: { circular: true },
    },
    ...LAYERS.slice(0, -1).map((layer, index) => ({
      name: `layer-${layer.join('-')}`,
      comment: `${layer.join('/, ')}/ import only from their own layer or below.`,
      severity: 'error',
      from: { path: folders(layer) },
      to: { path: [folders(LAYERS.slice(index + 1).flat()), ROOT_FILES] },
    })),
    {
      name: 'layer-health-dashboard-testing-cli',
      comment: 'health/, dashboard/, testing/, cli/ import only from their own layer or below.',
      severity: 'error',
      from: { path: folders(LAYERS[LAYERS.length - 1]) },
      to: { path: ROOT_FILES },
    },
    {
      name: 'client-not-worker',
      comment: 'client/ and worker/ never import each other.',
      severity: 'error',
      from: { path: '^lib/client/' },
      to: { path: '^lib/worker/' },
    },
    {
      name: 'worker-not-client',
      comment: 'client/ and worker/ never import each other.',
      severity: 'error',
      from: { path: '^lib/worker/' },
      to: { path: '^lib/client/' },
    },
  ],
  options: {
    includeOnly: '^lib/',
    exclude: { path: '^lib/dashboard/assets/' },
    // Count `import type` and type-only re-exports (erased by tsc, but part of the design).
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.build.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.json'] },
  },
};
