export * from './connection.ts';
export * from './database.ts';
export * from './migrator.ts';
export * from './schema-values.ts';
export * from './test-database.ts';
