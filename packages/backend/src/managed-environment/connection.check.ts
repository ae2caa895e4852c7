/**
 * The ordered checks of a GitOpsDeploymentManagedEnvironment (docs/api.md): Secret type and key, kubeconfig
 * parsing, the cluster entry matching apiURL and its context, the bearer token (optionally of a
 * ServiceAccount we create), and a real request. Every failure is a `{ok: false, reason, message}`
 * outcome, never a throw, and no message ever contains the token.
 */
import { ManagedEnvironmentMessage, ManagedEnvironmentReason, SecretKey, SecretType } from '@gitops/api';
import {
  HttpMethod,
  isNotFound,
  KubeApiError,
  KubeConfig,
  type KubeObject,
  kubeRequest,
  scrubString,
} from '@gitops/shared';
import { parse as parseYaml, YAMLError } from 'yaml';
import { isJsonObject } from '../json.ts';

export type CheckOutcome<T> =
  | { ok: true; value: T }
  /** `refused`: the cluster answered 401/403 to these credentials. */
  | { ok: false; reason: ManagedEnvironmentReason; message: string; refused?: boolean };

export interface ManagedEnvironmentSpec {
  apiURL: string;
  credentialsSecret: string;
  allowInsecureSkipTLSVerify: boolean;
  createNewServiceAccount: boolean;
  namespaces: string[];
  clusterResources: boolean;
}

/** A namespace name (a DNS-1123 label; at most 63 characters, checked separately). */
export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function fail<T>(reason: ManagedEnvironmentReason, message: string): CheckOutcome<T> {
  return { ok: false, reason, message };
}

/** Parses `spec` leniently (admission already validates; a malformed object becomes a condition). */
export function parseManagedEnvironmentSpec(spec: unknown): CheckOutcome<ManagedEnvironmentSpec> {
  if (!isJsonObject(spec)) return fail(ManagedEnvironmentReason.UnsupportedAPIURL, 'spec is missing');
  const apiURL = typeof spec.apiURL === 'string' ? spec.apiURL : '';
  let url: URL | undefined;
  try {
    url = new URL(apiURL);
  } catch {
    url = undefined;
  }
  if (url?.protocol !== 'https:' || apiURL.includes('?') || apiURL.includes('&')) {
    return fail(ManagedEnvironmentReason.UnsupportedAPIURL, 'cluster api url must start with https://');
  }
  const namespaces = spec.namespaces ?? [];
  if (
    !Array.isArray(namespaces) ||
    !namespaces.every((n) => typeof n === 'string' && DNS1123_LABEL.test(n))
  ) {
    return fail(
      ManagedEnvironmentReason.InvalidNamespaceList,
      'the namespaces list must contain only valid namespace names (DNS-1123 labels)',
    );
  }
  return {
    ok: true,
    value: {
      apiURL,
      credentialsSecret: typeof spec.credentialsSecret === 'string' ? spec.credentialsSecret : '',
      allowInsecureSkipTLSVerify: spec.allowInsecureSkipTLSVerify === true,
      createNewServiceAccount: spec.createNewServiceAccount === true,
      namespaces: [...new Set(namespaces as string[])],
      clusterResources: spec.clusterResources === true,
    },
  };
}

/** The target cluster as read from the user's kubeconfig: only the server, CA and bearer token are kept. */
export interface TargetCluster {
  server: string;
  caData: string | undefined;
  token: string;
}

/** The top-level fields of a kubeconfig document; a mapping with none of them is not one. */
const KUBECONFIG_FIELDS = ['apiVersion', 'kind', 'clusters', 'contexts', 'users', 'current-context'];

/**
 * Why a Secret's kubeconfig text is not a kubeconfig document at all (undefined when it is a YAML mapping
 * with at least one kubeconfig field).
 * The Kubernetes client accepts any text as an empty configuration, which would hide a broken Secret behind
 * "no cluster entry for the API URL". The YAML parser's own message quotes the document (and so possibly
 * the token), so only its error code and position are kept.
 */
export function kubeconfigDocumentProblem(text: string): string | undefined {
  let document: unknown;
  try {
    document = parseYaml(text);
  } catch (err) {
    if (err instanceof YAMLError) {
      const at = err.linePos?.[0];
      return `YAML error ${err.code}${at ? ` at line ${at.line}, column ${at.col}` : ''}`;
    }
    return 'the YAML parser failed';
  }
  if (isJsonObject(document)) {
    if (KUBECONFIG_FIELDS.some((field) => field in document)) return undefined;
    return `the document has none of the fields ${KUBECONFIG_FIELDS.join(', ')}`;
  }
  const what = document === null ? 'empty' : Array.isArray(document) ? 'a list' : `a ${typeof document}`;
  return `the document is ${what}, not a mapping`;
}

/** Step 1 (docs/api.md): the Secret, its kubeconfig, the cluster entry for apiURL and its context's token. */
export function readTargetCluster(
  secret: KubeObject | undefined,
  spec: ManagedEnvironmentSpec,
): CheckOutcome<TargetCluster> {
  if (!secret) {
    return fail(
      ManagedEnvironmentReason.SecretNotFound,
      `the Secret '${spec.credentialsSecret}' referenced by .spec.credentialsSecret was not found in this namespace`,
    );
  }
  const type = (secret as { type?: unknown }).type;
  if (type !== SecretType.ManagedEnvironment) {
    return fail(
      ManagedEnvironmentReason.InvalidSecretType,
      ManagedEnvironmentMessage.invalidSecretType(String(type ?? '')),
    );
  }
  const data = (secret as { data?: unknown }).data;
  const encoded = isJsonObject(data) ? data[SecretKey.Kubeconfig] : undefined;
  if (typeof encoded !== 'string' || encoded === '') {
    return fail(
      ManagedEnvironmentReason.MissingKubeConfigField,
      ManagedEnvironmentMessage.MissingKubeConfigField,
    );
  }
  const text = Buffer.from(encoded, 'base64').toString('utf8');
  const problem = kubeconfigDocumentProblem(text);
  if (problem) {
    return fail(
      ManagedEnvironmentReason.UnableToParseKubeconfigData,
      `unable to parse the kubeconfig data in the Secret: it is not a valid kubeconfig (${problem})`,
    );
  }
  const kc = new KubeConfig();
  try {
    kc.loadFromString(text);
  } catch (err) {
    // The client's message may quote the document (and so the token): keep only a generic description.
    void err;
    return fail(
      ManagedEnvironmentReason.UnableToParseKubeconfigData,
      'unable to parse the kubeconfig data in the Secret: it is not a valid kubeconfig',
    );
  }
  // A well-formed kubeconfig without clusters (e.g. an empty `Config`) has no entry for the API URL.
  const wanted = spec.apiURL.replace(/\/+$/, '').toLowerCase();
  const cluster = kc.getClusters().find((c) => c.server.replace(/\/+$/, '').toLowerCase() === wanted);
  const context = cluster ? kc.getContexts().find((c) => c.cluster === cluster.name) : undefined;
  if (!cluster || !context) {
    return fail(
      ManagedEnvironmentReason.UnableToLocateContext,
      ManagedEnvironmentMessage.unableToLocateContext(spec.apiURL),
    );
  }
  const user = kc.getUser(context.user);
  if (!user?.token) {
    const certificates = user?.certData || user?.certFile || user?.keyData;
    return fail(
      ManagedEnvironmentReason.UnableToCreateClient,
      certificates
        ? `the kubeconfig user '${context.user}' authenticates with a client certificate, which is not supported: use a bearer token`
        : `the kubeconfig user '${context.user}' of context '${context.name}' has no bearer token`,
    );
  }
  if (!HEADER_SAFE_TOKEN.test(user.token)) {
    // fetch refuses such a header and quotes the whole value in its error: never let it get that far.
    return fail(
      ManagedEnvironmentReason.UnableToCreateClient,
      `the bearer token of kubeconfig user '${context.user}' contains characters that cannot be sent in an HTTP header (control characters, spaces or non-ASCII)`,
    );
  }
  return { ok: true, value: { server: cluster.server, caData: cluster.caData, token: user.token } };
}

/** What a bearer token may consist of (visible ASCII; RFC 6750's b64token is a subset). */
const HEADER_SAFE_TOKEN = /^[\x21-\x7e]+$/;

/** A KubeConfig that talks to `apiURL` with `token` (nothing else of the user's kubeconfig: no exec, no files). */
export function targetKubeConfig(target: TargetCluster, token: string, insecure: boolean): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: 'target',
        server: target.server,
        caData: insecure ? undefined : target.caData,
        skipTLSVerify: insecure,
      },
    ],
    users: [{ name: 'target', token }],
    contexts: [{ name: 'target', cluster: 'target', user: 'target' }],
    currentContext: 'target',
  });
  return kc;
}

function statusOf(err: unknown): number | undefined {
  return err instanceof KubeApiError ? err.statusCode : undefined;
}

const TLS_ERROR =
  /certificate|self[- ]signed|CERT_|UNABLE_TO_VERIFY|DEPTH_ZERO|ERR_TLS|unable to get local issuer/i;

/** Text of a failed connection (DNS, refused, TLS) without the request body or headers. */
function errorText(err: unknown): string {
  if (!(err instanceof Error)) return scrubString(String(err));
  const parts = [err.message];
  let cause: unknown = err.cause;
  while (cause instanceof Error && parts.length < 4) {
    if (!parts.some((p) => p.includes(cause instanceof Error ? cause.message : '')))
      parts.push(cause.message);
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string' && !parts.join(' ').includes(code)) parts.push(code);
    cause = cause.cause;
  }
  // A cause's message may quote a request header (fetch does, for a value it refuses): scrub it.
  return scrubString(parts.join(': '));
}

/** Maps an error of a request to the target cluster to the reason and message the user sees. */
export function classifyConnectionError(
  err: unknown,
  apiURL: string,
  reasonFor401403: ManagedEnvironmentReason = ManagedEnvironmentReason.UnableToValidateClusterCredentials,
): { reason: ManagedEnvironmentReason; message: string } {
  if (statusOf(err) === 401) {
    return {
      reason: reasonFor401403,
      message: `the cluster rejected the credentials (401 Unauthorized): verify the API URL '${apiURL}' and the bearer token in the kubeconfig`,
    };
  }
  if (statusOf(err) === 403) return { reason: reasonFor401403, message: ManagedEnvironmentMessage.Forbidden };
  const text = errorText(err);
  if (TLS_ERROR.test(text)) {
    return {
      reason: ManagedEnvironmentReason.UnableToValidateClusterCredentials,
      message: `unable to verify the TLS certificate of '${apiURL}' (${text}): add its CA to the kubeconfig, or set .spec.allowInsecureSkipTLSVerify to true`,
    };
  }
  if ((statusOf(err) ?? 0) !== 0) {
    return {
      reason: ManagedEnvironmentReason.UnableToValidateClusterCredentials,
      message: `unable to validate the cluster credentials: ${text}`,
    };
  }
  return {
    reason: ManagedEnvironmentReason.UnableToCreateClient,
    message: `unable to connect to '${apiURL}': ${text}`,
  };
}

/** Step 3: GET the first of `namespaces`, else LIST namespaces. */
export async function verifyCredentials(
  kc: KubeConfig,
  spec: ManagedEnvironmentSpec,
  signal: AbortSignal,
): Promise<CheckOutcome<void>> {
  const first = spec.namespaces[0];
  try {
    await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: first ? `/api/v1/namespaces/${encodeURIComponent(first)}` : '/api/v1/namespaces',
      query: first ? undefined : { limit: 1 },
      signal,
      timeoutMs: 15_000,
    });
    return { ok: true, value: undefined };
  } catch (err) {
    if (signal.aborted) throw err;
    if (first && isNotFound(err)) {
      return fail(
        ManagedEnvironmentReason.UnableToValidateClusterCredentials,
        `the namespace '${first}' listed in .spec.namespaces does not exist on the cluster`,
      );
    }
    const { reason, message } = classifyConnectionError(err, spec.apiURL);
    const status = statusOf(err);
    return { ok: false, reason, message, refused: status === 401 || status === 403 };
  }
}
