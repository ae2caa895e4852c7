/**
 * The one error hierarchy of the service (see ../ERRORS.md for the table of codes).
 *
 * - `TerminalError`: retrying cannot help (bad configuration, an object that can never be valid).
 *   The work queue logs and counts it and does NOT requeue the key (controller-runtime's
 *   `reconcile.TerminalError`). The key is reconciled again only when something changes.
 * - `RetryableError`: the same call may succeed later (API server down, conflict, throttling).
 *   The work queue requeues the key with per-key exponential backoff.
 * - Any other thrown value is treated as retryable, as in controller-runtime.
 *
 * Every error carries a stable `code` string; logs, metrics and docs use the code, never the message.
 */

/** Stable error codes. Add a row to ERRORS.md when adding one here. */
export const ErrorCode = {
  /** Environment variables failed validation at start-up. */
  configInvalid: 'CONFIG_INVALID',
  /** An object (CR, row, argument) is malformed; retrying with the same input cannot succeed. */
  invalidObject: 'INVALID_OBJECT',
  /** A reconciler decided that retrying cannot help. */
  reconcileTerminal: 'RECONCILE_TERMINAL',
  /** A reconciler failed in a way that may succeed later. */
  reconcileRetryable: 'RECONCILE_RETRYABLE',
  /** Kubernetes API: 404 Not Found. */
  kubeNotFound: 'KUBE_NOT_FOUND',
  /** Kubernetes API: 409 Conflict (stale resourceVersion, or server-side apply field conflict). */
  kubeConflict: 'KUBE_CONFLICT',
  /** Kubernetes API: 410 Gone (resourceVersion too old, a watch must relist). */
  kubeGone: 'KUBE_GONE',
  /** Kubernetes API: 401 Unauthorized or 403 Forbidden. */
  kubeForbidden: 'KUBE_FORBIDDEN',
  /** Kubernetes API: 400 Bad Request or 422 Invalid (admission/validation rejected the object). */
  kubeInvalid: 'KUBE_INVALID',
  /** Kubernetes API: 429 Too Many Requests (API priority and fairness). */
  kubeThrottled: 'KUBE_THROTTLED',
  /** Kubernetes API: 5xx, or the connection failed. */
  kubeUnavailable: 'KUBE_UNAVAILABLE',
  /** API discovery does not know the kind (e.g. its CRD is not installed yet). */
  kubeUnknownKind: 'KUBE_UNKNOWN_KIND',
  /** Kubernetes API: any other non-2xx answer. */
  kubeRequestFailed: 'KUBE_REQUEST_FAILED',
  /** The kubeconfig could not be loaded or has no current cluster. */
  kubeconfigInvalid: 'KUBECONFIG_INVALID',
  /** Graceful shutdown did not finish within its hard timeout. */
  shutdownTimeout: 'SHUTDOWN_TIMEOUT',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export interface GitOpsErrorOptions {
  cause?: unknown;
}

/** Base class of every error the service throws on purpose. Not thrown directly. */
export abstract class GitOpsError extends Error {
  readonly code: string;
  abstract readonly retryable: boolean;

  constructor(code: string, message: string, options?: GitOpsErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.name = new.target.name;
  }
}

/** Retrying cannot help: the work queue does not requeue the key. */
export class TerminalError extends GitOpsError {
  readonly retryable = false;

  constructor(code: string, message: string, options?: GitOpsErrorOptions) {
    super(code, message, options);
  }
}

/** The same call may succeed later: the work queue requeues the key with backoff. */
export class RetryableError extends GitOpsError {
  readonly retryable = true;

  constructor(code: string, message: string, options?: GitOpsErrorOptions) {
    super(code, message, options);
  }
}

/** One invalid environment variable: `name` and a message that names it. */
export interface ConfigIssue {
  name: string;
  message: string;
}

/** Configuration is invalid. Lists every bad variable at once, so one restart fixes them all. */
export class ConfigError extends TerminalError {
  readonly issues: readonly ConfigIssue[];

  constructor(issues: readonly ConfigIssue[]) {
    super(
      ErrorCode.configInvalid,
      `invalid configuration:\n${issues.map((issue) => `  - ${issue.message}`).join('\n')}`,
    );
    this.issues = issues;
  }
}

/** A non-2xx answer from the Kubernetes API server, or a failed connection (`statusCode` 0). */
export class KubeApiError extends RetryableError {
  /** HTTP status; 0 when the request never got an answer. */
  readonly statusCode: number;
  /** `reason` of the returned `Status` object (e.g. `AlreadyExists`, `Conflict`), if any. */
  readonly reason: string | undefined;
  /** `details.causes[].reason` of the returned `Status` (e.g. `NamespaceTerminating`, `FieldValueInvalid`). */
  readonly causes: readonly string[];
  /** `message` of the returned `Status` alone (what the API server said, e.g. a CEL rule's message); '' if none. */
  readonly statusMessage: string;
  readonly method: string;
  readonly path: string;

  constructor(
    init: {
      statusCode: number;
      reason?: string;
      causes?: readonly string[];
      statusMessage?: string;
      method: string;
      path: string;
      message: string;
    },
    options?: GitOpsErrorOptions,
  ) {
    super(kubeErrorCode(init.statusCode), init.message, options);
    this.statusCode = init.statusCode;
    this.reason = init.reason;
    this.causes = init.causes ?? [];
    this.statusMessage = init.statusMessage ?? '';
    this.method = init.method;
    this.path = init.path;
  }
}

/** Maps an HTTP status from the API server to a stable code. */
export function kubeErrorCode(statusCode: number): ErrorCode {
  if (statusCode === 404) return ErrorCode.kubeNotFound;
  if (statusCode === 409) return ErrorCode.kubeConflict;
  if (statusCode === 410) return ErrorCode.kubeGone;
  if (statusCode === 401 || statusCode === 403) return ErrorCode.kubeForbidden;
  if (statusCode === 400 || statusCode === 422) return ErrorCode.kubeInvalid;
  if (statusCode === 429) return ErrorCode.kubeThrottled;
  if (statusCode === 0 || statusCode >= 500) return ErrorCode.kubeUnavailable;
  return ErrorCode.kubeRequestFailed;
}

/**
 * True when the error must not be retried: the outermost error of our hierarchy decides; a plain
 * `Error` wrapping a `TerminalError` in its `cause` chain is terminal too.
 */
export function isTerminalError(err: unknown): boolean {
  let current: unknown = err;
  for (let depth = 0; depth < 10 && current instanceof Error; depth++) {
    if (current instanceof GitOpsError) return !current.retryable;
    current = current.cause;
  }
  return false;
}

/** True for a 404 from the API server. */
export function isNotFound(err: unknown): boolean {
  return err instanceof KubeApiError && err.statusCode === 404;
}

/**
 * True when a create met an object of that name (409 AlreadyExists), and only then: not for a stale
 * resourceVersion or an apply conflict, which are 409s too (isConflict).
 */
export function isAlreadyExists(err: unknown): boolean {
  return err instanceof KubeApiError && err.statusCode === 409 && err.reason === 'AlreadyExists';
}

/**
 * True when the API server refused a create because the namespace is being deleted: 403 with the cause
 * `NamespaceTerminating` its namespace lifecycle admission adds (by the Status's fields, not its words).
 */
export function isNamespaceTerminating(err: unknown): boolean {
  return err instanceof KubeApiError && err.statusCode === 403 && err.causes.includes('NamespaceTerminating');
}

/** True for a 409 from the API server (stale resourceVersion, apply conflict, AlreadyExists). */
export function isConflict(err: unknown): boolean {
  return err instanceof KubeApiError && err.statusCode === 409;
}

/**
 * An HTTP status that says "try again later", whoever answered (the API server, the cloud services, a Git
 * server): no answer at all (0), throttled (429), or a server error (5xx). Every "retry or not" decision on
 * an HTTP answer starts from this one rule and adds what its own API means by a conflict.
 */
export function isTransientStatus(status: number): boolean {
  return status === 0 || status === 429 || status >= 500;
}

/** API server answers that say "look again later" beyond `isTransientStatus`: not found, conflict, gone. */
const KUBE_LOOK_AGAIN_STATUS = new Set([404, 409, 410]);
/**
 * PostgreSQL SQLSTATEs of a lost or refused connection, a shutdown, or a concurrency loss that a retry
 * resolves: class 08 (connection exception), 57P01–57P03 (admin/crash shutdown, cannot connect now), 53300
 * (too many connections), 40001 (serialization failure), 40P01 (deadlock), 55P03 (lock not available),
 * 23503 (foreign key violation: the referenced row was deleted by another transaction meanwhile, e.g. an
 * application deleted while its state was written; the retry finds it gone).
 */
const TRANSIENT_SQLSTATE = /^(08...|57P0[123]|53300|40001|40P01|55P03|23503)$/;
/** Node's socket errors (a connection refused, reset or timed out). */
const TRANSIENT_SYSCALL = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH']);
/**
 * node-postgres says these in words only (no code): a connection ended under a query, or never opened; and
 * Kysely, for the next query on a connection whose client reported such an error (it is discarded then).
 */
const TRANSIENT_PG_MESSAGE =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Postgres connection has been discarded)/;

/**
 * True when the error is what a healthy system meets in the ordinary course and a retry resolves: an API
 * server conflict, a 404 of an object deleted meanwhile, the API server or PostgreSQL restarting or
 * unreachable. The `cause` chain is searched. Logs keep these below error level until they persist.
 */
export function isTransientError(err: unknown): boolean {
  let current: unknown = err;
  for (let depth = 0; depth < 10 && current instanceof Error; depth++) {
    if (current instanceof KubeApiError) {
      return isTransientStatus(current.statusCode) || KUBE_LOOK_AGAIN_STATUS.has(current.statusCode);
    }
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && (TRANSIENT_SQLSTATE.test(code) || TRANSIENT_SYSCALL.has(code))) {
      return true;
    }
    if (TRANSIENT_PG_MESSAGE.test(current.message)) return true;
    current = current.cause;
  }
  return false;
}

/** The stable code of an error, for logs and metrics; `UNKNOWN` for errors outside the hierarchy. */
export function errorCode(err: unknown): string {
  return err instanceof GitOpsError ? err.code : 'UNKNOWN';
}
