/** Unit tests need no Redis; e2e and chaos tests share one redis-server started by the global setup. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts'],
  transform: { '^.+\\.ts$': 'ts-jest' },
  globalSetup: '<rootDir>/test/support/redis.global-setup.ts',
  globalTeardown: '<rootDir>/test/support/redis.global-teardown.ts',
  testTimeout: 30000,
  maxWorkers: 2,
};
