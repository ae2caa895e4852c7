/**
 * Per-object memo of `git ls-remote` outcomes, so validation never runs in a hot loop: the same input
 * (fingerprint of URL + credentials) is re-validated only when it is due — a valid one every
 * `revalidateMs`, a failed one after `failureBackoffMs` doubling per consecutive failure (capped at
 * `revalidateMs`). A changed input (edited CR or Secret) is validated at once.
 */
import { backoffCeiling } from '@gitops/shared';
import type { LsRemoteOutcome } from './git-ls-remote.ts';

export interface ValidationMemoOptions {
  revalidateMs: number;
  failureBackoffMs: number;
  now?: () => number;
}

export interface ValidationMemo {
  /** The memoised outcome if still due later, else runs `validate`; plus when to look again. */
  check(
    key: string,
    fingerprint: string,
    validate: () => Promise<LsRemoteOutcome>,
  ): Promise<{ outcome: LsRemoteOutcome; requeueAfter: number; ran: boolean }>;
  forget(key: string): void;
}

interface Entry {
  fingerprint: string;
  outcome: LsRemoteOutcome;
  checkedAt: number;
  failures: number;
}

export function createValidationMemo(options: ValidationMemoOptions): ValidationMemo {
  const now = options.now ?? Date.now;
  const entries = new Map<string, Entry>();
  const waitAfter = (outcome: LsRemoteOutcome, failures: number) =>
    outcome.result === 'valid'
      ? options.revalidateMs
      : backoffCeiling(failures, options.failureBackoffMs, options.revalidateMs);

  return {
    async check(key, fingerprint, validate) {
      const entry = entries.get(key);
      const at = now();
      if (entry && entry.fingerprint === fingerprint) {
        const due = entry.checkedAt + waitAfter(entry.outcome, entry.failures);
        if (at < due) return { outcome: entry.outcome, requeueAfter: due - at, ran: false };
      }
      const outcome = await validate();
      const failures =
        outcome.result === 'valid' ? 0 : entry?.fingerprint === fingerprint ? entry.failures + 1 : 1;
      entries.set(key, { fingerprint, outcome, checkedAt: now(), failures });
      return { outcome, requeueAfter: waitAfter(outcome, failures), ran: true };
    },
    forget(key) {
      entries.delete(key);
    },
  };
}
