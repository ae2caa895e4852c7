/**
 * Time as a dependency: the work queue and the informer read time and schedule timers only through
 * a `Clock`, so unit tests drive them with `createManualClock()` and assert on the delays that were
 * scheduled, never on wall-clock time.
 */

export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since an arbitrary origin (monotonic for the system clock). */
  now(): number;
  setTimer(callback: () => void, delayMs: number): TimerHandle;
}

/** Real time: `performance.now()` and `setTimeout`. */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimer(callback, delayMs) {
    // setTimeout overflows above 2^31-1 ms (~24.8 days) and would fire at once; clamp.
    const timer = setTimeout(callback, Math.min(Math.max(0, delayMs), 2_147_483_647));
    return { cancel: () => clearTimeout(timer) };
  },
};

/** Resolves after `delayMs` on `clock`, or at once when `signal` aborts. Never rejects. */
export function sleep(clock: Clock, delayMs: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      timer.cancel();
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = clock.setTimer(done, delayMs);
    signal?.addEventListener('abort', done, { once: true });
  });
}

export interface ManualClock extends Clock {
  /** Moves time forward, firing due timers in order of their due time. */
  advance(ms: number): void;
  /** Fires every pending timer due at or before the earliest pending one; returns false if none. */
  runNext(): boolean;
  /** Every delay passed to `setTimer`, in call order. */
  readonly scheduledDelays: number[];
  /** Timers not yet fired or cancelled. */
  pendingTimers(): Array<{ dueAt: number; delayMs: number }>;
}

/** A clock that only moves when told to, for unit tests. */
export function createManualClock(startMs = 0): ManualClock {
  let now = startMs;
  let sequence = 0;
  const timers = new Map<number, { dueAt: number; delayMs: number; callback: () => void }>();
  const scheduledDelays: number[] = [];

  const fireDue = (until: number) => {
    for (;;) {
      let next: [number, { dueAt: number; callback: () => void }] | undefined;
      for (const entry of timers) {
        if (entry[1].dueAt <= until && (!next || entry[1].dueAt < next[1].dueAt)) next = entry;
      }
      if (!next) break;
      timers.delete(next[0]);
      now = Math.max(now, next[1].dueAt);
      next[1].callback();
    }
    now = Math.max(now, until);
  };

  return {
    now: () => now,
    setTimer(callback, delayMs) {
      const id = sequence++;
      scheduledDelays.push(delayMs);
      timers.set(id, { dueAt: now + Math.max(0, delayMs), delayMs, callback });
      return { cancel: () => timers.delete(id) };
    },
    advance(ms) {
      fireDue(now + ms);
    },
    runNext() {
      let earliest: number | undefined;
      for (const timer of timers.values())
        if (earliest === undefined || timer.dueAt < earliest) earliest = timer.dueAt;
      if (earliest === undefined) return false;
      fireDue(earliest);
      return true;
    },
    scheduledDelays,
    pendingTimers: () => [...timers.values()].map(({ dueAt, delayMs }) => ({ dueAt, delayMs })),
  };
}
