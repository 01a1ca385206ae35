/**
 * The fault suite (`npm run test:chaos`): test/chaos/**, forked worker processes, killed and
 * paused redis-servers and proxies. One test file at a time (maxWorkers 1): each file starts OS
 * processes of its own, and on a 2-core machine parallel files would starve each other's
 * heartbeats into false lease losses. Shares the main config's global setup (a private
 * redis-server unless REDIS_URL is set).
 */
const base = require('./jest.config');

module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/chaos/**/*.spec.ts'],
  testPathIgnorePatterns: ['/node_modules/'],
  testTimeout: 180000,
  maxWorkers: 1,
};
