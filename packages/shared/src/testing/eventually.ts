/**
 * Polls `check` until it returns a value other than `undefined` or `false` and returns that value: the one
 * way tests wait for something a real process does asynchronously. A check that throws counts as "not yet"
 * (the object may not exist yet); when the time is up, the error names `what` and carries the last thrown
 * error as `cause` and in the message.
 */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 90_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastError === undefined ? '' : ` (last error: ${String(lastError)})`}`,
        { cause: lastError },
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
