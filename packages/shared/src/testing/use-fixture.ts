import { afterAll, beforeAll } from 'vitest';

/**
 * A fixture for the tests of the enclosing file or describe block: `create` makes it before the first of
 * them (beforeAll) and `release` ends it after the last (afterAll), so a test file says what it uses in one
 * line instead of a variable and two hooks. Call it before the block's own hooks (they run after its
 * beforeAll, so they can use the fixture).
 *
 * The returned object stands for the fixture `create` made: reading a property or calling a method forwards
 * to it. Use it inside hooks and tests only; before beforeAll has made the fixture, any use throws.
 */
export function useFixture<T extends object>(
  create: () => Promise<T>,
  release: (fixture: T) => Promise<void>,
): T {
  let current: T | undefined;
  beforeAll(async () => {
    current = await create();
  });
  afterAll(async () => {
    if (current !== undefined) await release(current);
  });
  const made = (): T => {
    if (current === undefined) throw new Error('the fixture exists only from beforeAll to afterAll');
    return current;
  };
  return new Proxy({} as T, {
    get(_target, key) {
      const fixture = made();
      const value: unknown = Reflect.get(fixture, key, fixture);
      return typeof value === 'function' ? value.bind(fixture) : value;
    },
    set: (_target, key, value) => Reflect.set(made(), key, value),
    has: (_target, key) => Reflect.has(made(), key),
  });
}
