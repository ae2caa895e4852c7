/**
 * Per-key exponential backoff with client-go's `ItemExponentialFailureRateLimiter` semantics:
 * the n-th consecutive failure of a key waits `base * 2^n`, capped at `max`; `forget(key)` (called
 * on success) resets the key. controller-runtime's defaults are 5 ms and 1000 s.
 */
import { backoffCeiling } from './backoff.ts';

export interface RateLimiter {
  /** Records a failure of `key` and returns how long to wait before retrying it. */
  when(key: string): number;
  /** Resets `key` after a success. */
  forget(key: string): void;
  /** Consecutive failures recorded for `key`. */
  numRequeues(key: string): number;
}

export interface ExponentialBackoffOptions {
  /** Default 5 ms. */
  baseDelayMs?: number;
  /** Default 1000 s. */
  maxDelayMs?: number;
}

export const defaultBaseDelayMs = 5;
export const defaultMaxDelayMs = 1_000_000;

export function createItemExponentialFailureRateLimiter(
  options: ExponentialBackoffOptions = {},
): RateLimiter {
  const base = options.baseDelayMs ?? defaultBaseDelayMs;
  const max = options.maxDelayMs ?? defaultMaxDelayMs;
  const failures = new Map<string, number>();
  return {
    when(key) {
      const exponent = failures.get(key) ?? 0;
      failures.set(key, exponent + 1);
      return backoffCeiling(exponent + 1, base, max);
    },
    forget(key) {
      failures.delete(key);
    },
    numRequeues(key) {
      return failures.get(key) ?? 0;
    },
  };
}
