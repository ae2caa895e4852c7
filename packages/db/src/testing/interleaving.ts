/**
 * Two transactions in a chosen order, for tests of what concurrent writers do to each other: one held open
 * (its locks kept) until the test lets it commit, and a way to see that another one waits for it.
 */
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../database.ts';

/**
 * Runs `work` in a transaction that stays open until `release()`: `ready` resolves once `work` is done (its
 * locks taken), `done` with what `work` returned once the transaction has committed.
 */
export function openTransaction<T>(db: Kysely<Database>, work: (trx: Transaction<Database>) => Promise<T>) {
  const { promise: held, resolve: release } = Promise.withResolvers<void>();
  const { promise: ready, resolve: worked } = Promise.withResolvers<void>();
  const done = db.transaction().execute(async (trx) => {
    const result = await work(trx);
    worked();
    await held;
    return result;
  });
  return { ready, release, done };
}

/** Whether `promise` (a transaction started after one held open) is still pending 300 ms on: it waits for a lock. */
export const stillPending = async (promise: Promise<unknown>): Promise<boolean> =>
  (await Promise.race([
    promise.then(() => false),
    new Promise((resolve) => setTimeout(() => resolve(true), 300)),
  ])) === true;
