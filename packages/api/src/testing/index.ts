/** `@gitops/api/testing`: builders for the core kinds (tests only; not part of `@gitops/api`'s exports). */
export * from './builders.ts';
