/**
 * The one exponential backoff of the code base: `initialMs` at attempt 1, doubling, capped at `maxMs`.
 * `backoffDelay` adds ±20 % jitter (retries of many keys spread out); `backoffCeiling` is the same curve
 * without jitter, for callers that apply none or their own (a rate limiter, full jitter).
 */

/** Attempts beyond this double no further (2^52 × initialMs is finite and past any sensible cap). */
const MAX_EXPONENT = 52;

/** Exponential backoff without jitter: attempt 1 (or less) → initialMs, doubling, capped at maxMs. */
export function backoffCeiling(attempt: number, initialMs: number, maxMs: number): number {
  const exponent = Math.min(MAX_EXPONENT, Math.max(0, attempt - 1));
  return Math.min(maxMs, initialMs * 2 ** exponent);
}

/** Exponential backoff with ±20 % jitter: attempt 1 → initial, doubling, capped. */
export function backoffDelay(
  attempt: number,
  initialMs: number,
  maxMs: number,
  random = Math.random,
): number {
  return Math.round(backoffCeiling(attempt, initialMs, maxMs) * (0.8 + 0.4 * random()));
}

/**
 * Runs a start-up step until it succeeds, retrying with backoff (500 ms doubling to 10 s, ±20 %) for up to
 * `forMs`, so a process survives a briefly unavailable database or API server at start (as pods do). Gives
 * up at once when `giveUp(err)` says retrying cannot help (a TerminalError, a close during start).
 */
export async function retryAtStart<T>(
  what: string,
  step: () => Promise<T>,
  options: {
    logger: { warn(object: Record<string, unknown>, message: string): void };
    forMs: number;
    giveUp: (err: unknown) => boolean;
  },
): Promise<T> {
  const deadline = Date.now() + options.forMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (err) {
      if (options.giveUp(err) || Date.now() > deadline) throw err;
      const delay = backoffDelay(attempt, 500, 10_000);
      options.logger.warn({ err, attempt, retryInMs: delay }, `${what} failed; retrying`);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
