export * from './sluice.error';
export * from './input.errors';
export * from './run.errors';
export * from './definition.errors';
export * from './redis.errors';
export * from './migration.errors';
export * from './schedule.errors';
export * from './wait.errors';
