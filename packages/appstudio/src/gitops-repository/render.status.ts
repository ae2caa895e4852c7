/**
 * What the render says about a binding, as data: who writes its `status.components`, the state a
 * PromotionRun reads from its condition, the condition of a git failure, and the condition itself. Pure
 * functions; the steps that use them are in render.reconciler.ts.
 */
import { APPSTUDIO_FIELD_MANAGER } from '@gitops/api';
import { type KubeCondition, setKubeCondition } from '@gitops/shared';
import { parseConditions } from '../condition-pair.ts';
import { type BindingCr, list, record, text } from '../objects.ts';
import { type GitError, withoutUserInfo } from './git.ts';
import { type GitOpsRepository, REFUSAL_REASONS, RepoCondition } from './render.ts';

/** A problem only the user can fix (missing base, refused push) is looked at again this often. */
export const USER_FIX_RETRY_MS = 30_000;

/** A failure the user sees in the condition. */
export class RenderProblem extends Error {
  readonly retryAfterMs: number | 'backoff';
  /** The condition's reason (RepoCondition). */
  readonly reason: string;
  constructor(
    message: string,
    retryAfterMs: number | 'backoff' = USER_FIX_RETRY_MS,
    reason: string = RepoCondition.error,
  ) {
    super(message);
    this.retryAfterMs = retryAfterMs;
    this.reason = reason;
  }
}

/**
 * Whether a field manager other than ours writes the binding's `status.components` or
 * `status.gitopsRepoConditions` (App Studio's own application service does): then we stay out of its way.
 */
export function managedElsewhere(binding: Pick<BindingCr, 'metadata'>): string | undefined {
  for (const entry of list(binding.metadata.managedFields)) {
    const e = record(entry);
    if (text(e.manager) === APPSTUDIO_FIELD_MANAGER) continue;
    const status = record(record(e.fieldsV1)['f:status']);
    if ('f:components' in status || 'f:gitopsRepoConditions' in status) return text(e.manager) || 'unknown';
  }
  return undefined;
}

/**
 * What a PromotionRun should think of a binding's GitOps repository: `rendering` while this service has
 * not rendered the binding's current generation yet, `failed` with the condition's message, else `ready`
 * (also for bindings another service renders, whose conditions carry no observedGeneration).
 */
export function renderStateOf(
  binding: Pick<BindingCr, 'metadata' | 'status'>,
):
  | { state: 'ready' }
  | { state: 'rendering' }
  | { state: 'failed'; message: string; refused: boolean; since: string } {
  const written = binding.status?.gitopsRepoConditions?.find((c) => c.type === RepoCondition.type);
  const own = parseConditions(binding.status?.gitopsRepoConditions).find(
    (c) => c.type === RepoCondition.type,
  );
  const observed = written?.observedGeneration;
  if (!own || typeof observed !== 'number') return { state: 'ready' };
  if (observed < (binding.metadata.generation ?? 0)) return { state: 'rendering' };
  if (own.status === 'False')
    return {
      state: 'failed',
      message: own.message ?? '',
      // A refusal (REFUSAL_REASONS) and since when the condition says so: a PromotionRun ends at once on a
      // refusal reported during its step.
      refused: REFUSAL_REASONS.has(own.reason ?? ''),
      since: own.lastTransitionTime ?? '',
    };
  return { state: 'ready' };
}

/** The condition of a git failure: its message (no credential: git's words are redacted), retry and reason. */
export function gitFailureCondition(
  err: GitError,
  repo: GitOpsRepository,
): { message: string; retry: number | 'backoff'; reason: string } {
  const where = `the GitOps repository ${withoutUserInfo(repo.url)} (branch ${repo.branch})`;
  const userFix = (message: string, reason: string) => ({ message, retry: USER_FIX_RETRY_MS, reason });
  switch (err.failure) {
    case 'refused':
      return userFix(`the push to ${where} was refused: ${err.message}`, RepoCondition.pushRefused);
    case 'auth':
      return userFix(
        `the credentials for ${where} were refused (the namespace's RepositoryCredential for it): ${err.message}`,
        RepoCondition.credentialsRefused,
      );
    case 'hostKey':
      return userFix(
        `the SSH host key of ${where} is not trusted (not the key GITOPS_SSH_KNOWN_HOSTS_FILE lists for it): ${err.message}`,
        RepoCondition.hostKeyNotTrusted,
      );
    case 'notFound':
      return userFix(`${where} could not be read: ${err.message}`, RepoCondition.error);
    default:
      return {
        message: `${where} could not be reached, retrying: ${err.message}`,
        retry: 'backoff',
        reason: RepoCondition.error,
      };
  }
}

/**
 * The binding's condition with this verdict. `freshSince`: a verdict not later than this (the start of the
 * running PromotionRun's step) is given a new lastTransitionTime even when it says the same, because it is
 * now about that promotion's attempt: the PromotionRun ends only on a refusal whose time is after its
 * step's start (times are in whole seconds, so one in the same second is not taken as after it).
 */
export function repoCondition(
  binding: Pick<BindingCr, 'metadata' | 'status'>,
  verdict: { ok: boolean; message: string; reason?: string; freshSince?: string },
  now: Date,
): KubeCondition[] {
  const existing = parseConditions(binding.status?.gitopsRepoConditions).filter(
    (c) => c.type === RepoCondition.type,
  );
  const since = Date.parse(verdict.freshSince ?? '');
  const stale = existing.some((c) => Date.parse(c.lastTransitionTime ?? '') <= since);
  return setKubeCondition(
    stale ? [] : existing,
    {
      type: RepoCondition.type,
      status: verdict.ok ? 'True' : 'False',
      reason: verdict.ok ? RepoCondition.success : (verdict.reason ?? RepoCondition.error),
      message: verdict.message,
      observedGeneration: binding.metadata.generation ?? 0,
    },
    now,
  );
}
