/**
 * The fault suite (`npm run test:chaos`): test/chaos/**, forked worker processes, killed and
 * paused redis-servers and proxies. One test file at a time (maxWorkers 1): each file starts OS
 * processes of its own, and on a 2-core machine parallel files would starve each other's
 * heartbeats into false lease losses.
 */
const base = require('./jest.config');

module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/chaos/**/*.spec.ts'],
  testPathIgnorePatterns: ['/node_modules/'],
  // The shared redis-server as in the main config, plus a registry of the servers tests start
  // (test/support/redis-process.ts), so those a failed test leaves running are killed at the end.
  globalSetup: '<rootDir>/test/support/chaos.global-setup.ts',
  globalTeardown: '<rootDir>/test/support/chaos.global-teardown.ts',
  testTimeout: 180000,
  maxWorkers: 1,
};
