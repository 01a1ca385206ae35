// ESLint (flat config): typescript-eslint's type-checked rules on all TypeScript. The layering of
// lib/ and its import cycles are checked by dependency-cruiser (.dependency-cruiser.cjs), which
// counts type-only imports.
import js from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig(
  globalIgnores([
    'dist/',
    'coverage/',
    'bench/results/',
    'test-results/',
    '.api-build/',
    'docs/api/', // the API reference TypeDoc generates (npm run docs)
    '.redis-test/',
    'test/compat/app/',
    'test/fixtures/previous-release/',
  ]),

  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // A promise nobody awaits or catches is a hang or an unhandled rejection waiting to happen.
      '@typescript-eslint/no-floating-promises': ['error', { ignoreVoid: true }],
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { attributes: false } }],
      '@typescript-eslint/require-await': 'off', // async for the signature (Nest hooks, ports) is fine
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/only-throw-error': 'error',
      // Passing a caught error on (typed unknown) is how this code forwards failures; like only-throw-error's
      // defaults, reject() may forward an unknown/any, while a literal non-Error is still refused.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      'no-console': 'error', // the library logs through Nest's Logger
    },
  },

  // Tests, sample and bench: the unsafe-* rules fit a library's code, not test doubles and fixtures
  // that handle untyped payloads on purpose. Promise rules stay on: a floating promise in a test is
  // a missed failure.
  {
    files: ['test/**/*.ts', 'sample/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/unbound-method': 'off', // expect(obj.method) and jest.spyOn are the norm
      'no-console': 'off',
    },
  },

  // Plain JavaScript: Node scripts and configs, and the dashboard's browser script. Not type-checked.
  {
    files: ['**/*.{js,mjs,cjs}'],
    extends: [tseslint.configs.disableTypeChecked],
    rules: { 'no-console': 'off', '@typescript-eslint/no-require-imports': 'off' },
  },
  { files: ['scripts/**/*.mjs', '*.{js,mjs,cjs}'], languageOptions: { globals: globals.node } },
  { files: ['jest.*.js'], languageOptions: { sourceType: 'commonjs', globals: globals.node } },
  { files: ['lib/dashboard/assets/**/*.js'], languageOptions: { sourceType: 'script', globals: globals.browser } },
);
