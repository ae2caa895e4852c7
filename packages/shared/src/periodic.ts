import type { Feature } from './feature.ts';
import type { Logger } from './logger.ts';

export interface Periodic {
  stop(): Promise<void>;
}

/**
 * Runs `task` now (unless `runAtStart` is false) and then every `intervalMs` plus up to `jitter` of it
 * (so replicas and restarts spread out), never twice at once. A failing run is logged; the next one still comes.
 */
export function runPeriodically(
  name: string,
  intervalMs: number,
  task: (signal: AbortSignal) => Promise<unknown>,
  options: { logger: Logger; jitter?: number; runAtStart?: boolean },
): Periodic {
  const abort = new AbortController();
  const jitter = options.jitter ?? 0.1;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;

  const run = () => {
    timer = undefined;
    running = (async () => {
      try {
        await task(abort.signal);
      } catch (err) {
        if (!abort.signal.aborted) options.logger.warn({ err, task: name }, 'periodic task failed');
      }
    })();
    void running.then(schedule);
  };
  const schedule = () => {
    if (abort.signal.aborted) return;
    timer = setTimeout(run, intervalMs * (1 + jitter * Math.random()));
    timer.unref();
  };
  if (options.runAtStart ?? true) run();
  else schedule();

  return {
    async stop() {
      abort.abort();
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}

/**
 * The start and stop of a feature's periodic job: `runPeriodically(taskName, intervalMs, task, options)` from
 * its start until its stop.
 */
export function periodicJob(
  taskName: string,
  intervalMs: number,
  task: (signal: AbortSignal) => Promise<unknown>,
  options: { logger: Logger; jitter?: number; runAtStart?: boolean },
): Pick<Feature, 'start' | 'stop'> {
  let periodic: Periodic | undefined;
  return {
    start() {
      periodic = runPeriodically(taskName, intervalMs, task, options);
    },
    async stop() {
      await periodic?.stop();
    },
  };
}

/**
 * A feature that only runs `task` periodically (`periodicJob`); `name` is its name in the process's feature
 * list.
 */
export function periodicFeature(
  name: string,
  taskName: string,
  intervalMs: number,
  task: (signal: AbortSignal) => Promise<unknown>,
  options: { logger: Logger; jitter?: number; runAtStart?: boolean },
): Feature {
  return { name, informers: [], ...periodicJob(taskName, intervalMs, task, options) };
}
