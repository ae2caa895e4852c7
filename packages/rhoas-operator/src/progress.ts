/**
 * The condition bookkeeping of one processing of a CR (packages/rhoas-operator/README.md, "Conditions"):
 * every condition of the kind starts `Unknown`; each turns `True` as its step passes; the first failing step
 * sets its condition `False` with a reason and message, `Finished` `False` with the same reason and
 * message, and stops the processing (later conditions stay `Unknown`); when every step passed, `Finished`
 * turns `True`. `lastTransitionGeneration` is the CR's `metadata.generation`. A layer on @gitops/shared's
 * condition bookkeeping (`nextCondition`).
 */
import { type RhoasCondition, RhoasConditionType, RhoasReason } from '@gitops/api';
import { findCondition, nextCondition } from '@gitops/shared';
import { CloudServicesError, standardizedErrorMessage } from './cloud-services-client.ts';

/** A step failed: processing stops; `transient` failures are retried with backoff. */
export class StepFailure extends Error {
  readonly condition: string;
  readonly reason: string;
  readonly transient: boolean;

  constructor(condition: string, reason: string, message: string, transient = false) {
    super(message);
    this.name = 'StepFailure';
    this.condition = condition;
    this.reason = reason;
    this.transient = transient;
  }
}

type State = Pick<RhoasCondition, 'status' | 'reason' | 'message'>;

export interface Progress {
  /** The condition `type` turns True. */
  pass(type: string): void;
  /** Records the failure of `type` (or of Finished alone) and throws it. */
  fail(type: string, reason: string, message: string, transient?: boolean): never;
  /** Runs a management API call as the step of condition `type`: True on success, its failure mapped. */
  step<T>(type: string, call: () => Promise<T>): Promise<T>;
}

export interface ProgressRecord extends Progress {
  /** Sets Finished True (every step passed). */
  finish(): void;
  /** Records `failure` (when it is not recorded yet). */
  record(failure: StepFailure): void;
  /** The condition list of the kind, in its order, given the CR's previous conditions. */
  conditions(
    previous: readonly RhoasCondition[] | undefined,
    generation: number,
    now: Date,
  ): RhoasCondition[];
}

/** How a management API failure reads in a condition. */
export function apiFailure(condition: string, err: unknown): StepFailure | undefined {
  if (!(err instanceof CloudServicesError)) return undefined;
  if (err.failure === 'http' && err.status !== undefined)
    return new StepFailure(
      condition,
      RhoasReason.ApiException,
      standardizedErrorMessage(err.status, err.reason),
      err.transient,
    );
  if (err.failure === 'malformed')
    return new StepFailure(condition, RhoasReason.MalformedResponse, err.message);
  return new StepFailure(condition, RhoasReason.ConnectionError, err.message, err.transient);
}

export function createProgress(types: readonly string[]): ProgressRecord {
  const states = new Map<string, State>(
    types.map((t) => [t, { status: 'Unknown', reason: '', message: '' }]),
  );
  let failed = false;

  const progress: ProgressRecord = {
    pass(type) {
      states.set(type, { status: 'True', reason: '', message: '' });
    },
    fail(type, reason, message, transient = false) {
      const failure = new StepFailure(type, reason, message, transient);
      progress.record(failure);
      throw failure;
    },
    async step(type, call) {
      try {
        const value = await call();
        progress.pass(type);
        return value;
      } catch (err) {
        const failure = apiFailure(type, err);
        if (failure) {
          progress.record(failure);
          throw failure;
        }
        throw err;
      }
    },
    finish() {
      states.set(RhoasConditionType.Finished, { status: 'True', reason: '', message: '' });
    },
    record(failure) {
      if (failed) return;
      failed = true;
      const state: State = { status: 'False', reason: failure.reason, message: failure.message };
      if (failure.condition !== RhoasConditionType.Finished) states.set(failure.condition, state);
      states.set(RhoasConditionType.Finished, state);
    },
    conditions(previous, generation, now) {
      return types.map((type) => {
        const state = states.get(type) ?? { status: 'Unknown', reason: '', message: '' };
        const before = findCondition(previous, type);
        // The shared bookkeeping keeps the time of an unchanged verdict; here a verdict about an older
        // generation counts as changed (the time says when this generation's verdict was reached).
        const { lastTransitionTime } = nextCondition(
          before?.lastTransitionGeneration === generation ? before : undefined,
          { type, status: state.status, reason: state.reason ?? '', message: state.message ?? '' },
          now,
        );
        return {
          type,
          status: state.status,
          reason: state.reason ?? '',
          message: state.message ?? '',
          lastTransitionTime,
          lastTransitionGeneration: generation,
        };
      });
    },
  };
  return progress;
}

/**
 * The original's gate: process a CR unless its `Finished` condition is True for its current generation
 * (no status, no conditions, an older or missing `lastTransitionGeneration`, or Finished not True: process).
 */
export function shouldProcess(object: {
  metadata: { generation?: number };
  status?: { conditions?: RhoasCondition[] } | undefined;
}): boolean {
  const conditions = object.status?.conditions;
  if (!Array.isArray(conditions) || conditions.length === 0) return true;
  const finished = conditions.find((c) => c?.type === RhoasConditionType.Finished);
  if (!finished) return true;
  const generation = object.metadata.generation ?? 0;
  if (typeof finished.lastTransitionGeneration !== 'number' || finished.lastTransitionGeneration < generation)
    return true;
  return finished.status !== 'True';
}
