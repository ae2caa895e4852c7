/**
 * Work that must not overlap per key (one tenant's AppProject, the deletion budget of an instance): each call
 * for a key starts once the previous call for it has settled, whatever its outcome. Keys with nothing running
 * are forgotten.
 */
export interface Turns {
  run<T>(key: string, work: () => Promise<T>): Promise<T>;
  /** Keys with work running or waiting (for tests and introspection). */
  readonly size: number;
}

export function createTurns(): Turns {
  const last = new Map<string, Promise<unknown>>();
  return {
    run<T>(key: string, work: () => Promise<T>): Promise<T> {
      const previous = last.get(key) ?? Promise.resolve();
      const turn = previous.catch(() => {}).then(work);
      last.set(key, turn);
      void turn
        .catch(() => {})
        .finally(() => {
          if (last.get(key) === turn) last.delete(key);
        });
      return turn;
    },
    get size() {
      return last.size;
    },
  };
}
