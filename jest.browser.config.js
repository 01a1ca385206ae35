/**
 * The browser suite (`npm run test:browser`): test/browser/**, the dashboard driven in a real
 * Chromium (Debian's, or CHROMIUM_PATH) through playwright-core. Screenshots go to
 * test-results/dashboard/.
 */
const base = require('./jest.config');

module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/browser/**/*.spec.ts'],
  testPathIgnorePatterns: ['/node_modules/'],
  testTimeout: 120000,
  maxWorkers: 1,
};
