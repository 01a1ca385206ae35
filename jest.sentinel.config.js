/**
 * The Sentinel suite (`npm run test:sentinel`): test/sentinel/**, a primary with replicas behind
 * three sentinels (test/support/redis-sentinel.ts), failed over during a drain. One file at a time,
 * with the fault suite's registry of started servers, so what a failed test leaves running is
 * killed at the end.
 */
const base = require('./jest.config');

module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/sentinel/**/*.spec.ts'],
  testPathIgnorePatterns: ['/node_modules/'],
  globalSetup: '<rootDir>/test/support/chaos.global-setup.ts',
  globalTeardown: '<rootDir>/test/support/chaos.global-teardown.ts',
  testTimeout: 180000,
  maxWorkers: 1,
};
