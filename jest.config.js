/**
 * Unit tests need no Redis; e2e tests share one redis-server started by the global setup. The
 * fault suite (test/chaos) runs separately, one file at a time: `npm run test:chaos` (jest.chaos.config.js);
 * so does the cluster suite (test/cluster): `npm run test:cluster` (jest.cluster.config.js), and the
 * TLS and ACL suite (test/secure): `npm run test:secure` (jest.secure.config.js).
 */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts'],
  testPathIgnorePatterns: [
    '/node_modules/',
    '<rootDir>/test/chaos/',
    '<rootDir>/test/cluster/',
    '<rootDir>/test/browser/',
    '<rootDir>/test/sentinel/',
    '<rootDir>/test/secure/',
  ],
  transform: {
    '^.+\\.ts$': 'ts-jest',
    // arktype (a dev dependency the schema tests use) ships only ES modules; Jest runs CommonJS.
    '^.+/node_modules/(arktype|arkregex|@ark)/.+\\.js$': ['ts-jest', { tsconfig: { allowJs: true, module: 'commonjs' } }],
  },
  transformIgnorePatterns: ['/node_modules/(?!(arktype|arkregex|@ark)/)'],
  globalSetup: '<rootDir>/test/support/redis.global-setup.ts',
  globalTeardown: '<rootDir>/test/support/redis.global-teardown.ts',
  testTimeout: 30000,
  maxWorkers: 2,
};
