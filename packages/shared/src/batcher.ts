/**
 * Group commit: calls that arrive while a batch is being written wait and go together in the next one. With
 * nothing in flight a call goes at once, alone, so a quiet process pays no delay; under a burst many writes
 * share one round trip (e.g. the agent's operation completions and application_state writes).
 */

export interface Batcher<I, O> {
  /** Resolves with this item's result once its batch is written; rejects when its batch fails. */
  submit(item: I): Promise<O>;
  /** Resolves when nothing is queued or in flight (tests, shutdown). */
  whenIdle(): Promise<void>;
}

export interface BatcherOptions<I, O> {
  /** Writes one batch; answers one result per item, in the items' order. */
  run(items: readonly I[]): Promise<readonly O[]>;
  /** Items per batch at most (default 100); more wait for the next batch. */
  maxBatch?: number;
}

interface Pending<I, O> {
  item: I;
  resolve(value: O): void;
  reject(error: unknown): void;
}

export function createBatcher<I, O>(options: BatcherOptions<I, O>): Batcher<I, O> {
  const maxBatch = options.maxBatch ?? 100;
  let queued: Pending<I, O>[] = [];
  let inFlight: Promise<void> | undefined;

  async function write(batch: Pending<I, O>[]): Promise<void> {
    try {
      const results = await options.run(batch.map((p) => p.item));
      if (results.length !== batch.length)
        throw new Error(`a batch of ${batch.length} answered ${results.length} results`);
      for (const [i, p] of batch.entries()) p.resolve(results[i] as O);
    } catch (err) {
      for (const p of batch) p.reject(err);
    }
  }

  function drain(): void {
    if (inFlight || queued.length === 0) return;
    const batch = queued.slice(0, maxBatch);
    queued = queued.slice(batch.length);
    inFlight = write(batch).finally(() => {
      inFlight = undefined;
      drain();
    });
  }

  return {
    submit(item) {
      return new Promise<O>((resolve, reject) => {
        queued.push({ item, resolve, reject });
        drain();
      });
    },
    async whenIdle() {
      while (inFlight) await inFlight;
    },
  };
}
