/**
 * What every App Studio feature receives. The backend builds it from its own context (app.ts); tests build
 * it directly and run the features alone against the API server. Nothing here touches the database.
 */
import { AppStudioKinds } from '@gitops/api';
import {
  createInformer,
  ErrorCode,
  type EventRecorder,
  errorCode,
  type Informer,
  type KubeConfig,
  type KubeObject,
  kindParser,
  type Logger,
  type Registry,
  resolveResource,
  TerminalError,
} from '@gitops/shared';
import type { AppStudioCr, AppStudioKindName } from './objects.ts';

export interface AppStudioOptions {
  readonly kc: KubeConfig;
  readonly registry: Registry;
  readonly logger: Logger;
  readonly events: EventRecorder;
  /**
   * Which App Studio objects (and generated objects) this process serves: the backend's shard selector
   * (`managed-gitops.redhat.com/backend-shard=<shard>`, or `!managed-gitops.redhat.com/backend-shard`).
   */
  readonly labelSelector: string;
  /** Labels stamped on every object we generate, so the backend of the same shard serves it. */
  readonly shardLabels: Readonly<Record<string, string>>;
  /**
   * Caches of core kinds the host process already keeps for this shard (`labelSelector`): used instead of a
   * second watch, so each event of those objects is received, parsed and held once (the backend passes its
   * GitOpsDeployment and ManagedEnvironment informers).
   */
  readonly sharedInformers?: Readonly<
    Partial<Record<'GitOpsDeployment' | 'GitOpsDeploymentManagedEnvironment', Informer<KubeObject>>>
  >;
  readonly resyncIntervalMs: number;
  readonly concurrency: number;
  /** A binding whose Application does not exist is deleted this long after its creation (default 3 min). */
  readonly applicationGracePeriodMs?: number;
  /** Every wait of a PromotionRun ends in Failure after this long (GITOPS_PROMOTION_TIMEOUT, default 10 min). */
  readonly promotionTimeoutMs?: number;
  /**
   * The limit of one git command of the GitOps repository render (GITOPS_RENDER_GIT_TIMEOUT, default 2 min:
   * a slow server's whole-history fetch must fit).
   */
  readonly renderGitTimeoutMs?: number;
  /**
   * An OpenSSH known_hosts file the render's SSH connections must match (GITOPS_SSH_KNOWN_HOSTS_FILE, read at
   * every connection); '' (default): a host's key is accepted on first use, with a warning at start.
   */
  readonly sshKnownHostsFile?: string;
  readonly now?: () => Date;
  /**
   * What the host does after the GitOps repository render pushed a commit (issue 34 item 4): the backend asks
   * Argo CD, through the database, to refresh the Applications of the namespace's GitOpsDeployments that follow
   * that branch, so a promotion step does not wait for Argo CD's poll (180 s by default). A rejection makes the
   * render's reconcile fail and try again (the push is not repeated). Default: nothing.
   */
  readonly onPushed?: (push: PushedCommit) => Promise<void>;
  /**
   * Run the appstudio.redhat.com/devsandbox provisioner (GITOPS_APPSTUDIO_DEVSANDBOX): needs the SpaceRequest
   * CRD (the Dev Sandbox host operator's, or manifests/components/devsandbox-dependencies). Default false.
   */
  readonly devSandbox?: boolean;
  /** DEV_ONLY_IGNORE_SELFSIGNED_CERT_IN_DEPLOYMENT_TARGET: targets made from SpaceRequests skip TLS checks. */
  readonly devSandboxInsecure?: boolean;
  /**
   * The managed-gitops.redhat.com/namespace provisioner: the API server URL and CA PEM it writes into its
   * kubeconfigs (GITOPS_NAMESPACE_PROVISIONER_API_URL / _CA_FILE; by default those of `kc`), how long its
   * tokens are asked for, how long before their expiry they are renewed and how often that is looked at
   * (GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME / _TOKEN_RENEW_BEFORE / _TOKEN_CHECK_INTERVAL, milliseconds;
   * defaults 8760h, 720h, 1h; the renew window must be shorter than the lifetime).
   */
  readonly namespaceProvisioner?: {
    apiURL?: string;
    caPem?: string;
    tokenLifetimeMs?: number;
    tokenRenewBeforeMs?: number;
    tokenCheckIntervalMs?: number;
  };
}

/** A commit the GitOps repository render pushed to `branch` of `repoURL` for a binding of `namespace`. */
export interface PushedCommit {
  namespace: string;
  repoURL: string;
  branch: string;
  commit: string;
}

/** Which objects an informer holds: this shard's (default), every shard's, or those a field selector picks. */
export interface InformerSelection {
  unsharded?: boolean;
  fieldSelector?: string;
}

export interface AppStudioContext extends Required<AppStudioOptions> {
  /** An informer of this shard's objects of `resource` (all namespaces). */
  informer(
    resource: { apiVersion: string; plural: string },
    select?: InformerSelection,
  ): Informer<KubeObject>;
  /**
   * An informer of this shard's objects of one App Studio kind, as its generated type (`AppStudioCr<K>`),
   * parsed once as they arrive (kindParser).
   */
  kindInformer<K extends AppStudioKindName>(kind: K, select?: InformerSelection): Informer<AppStudioCr<K>>;
}

export const DEFAULT_APPLICATION_GRACE_PERIOD_MS = 3 * 60_000;
export const DEFAULT_PROMOTION_TIMEOUT_MS = 10 * 60_000;
export const DEFAULT_RENDER_GIT_TIMEOUT_MS = 2 * 60_000;

export function createAppStudioContext(options: AppStudioOptions): AppStudioContext {
  function informer<T extends KubeObject = KubeObject>(
    resource: { apiVersion: string; plural: string },
    select: InformerSelection,
    parse?: (raw: unknown) => T,
  ): Informer<T> {
    return createInformer<T>({
      kubeConfig: options.kc,
      resource,
      labelSelector: select.unsharded || select.fieldSelector ? undefined : options.labelSelector,
      fieldSelector: select.fieldSelector,
      registry: options.registry,
      logger: options.logger,
      resyncPeriodMs: options.resyncIntervalMs,
      ...(parse ? { parse } : {}),
    });
  }
  return {
    applicationGracePeriodMs: DEFAULT_APPLICATION_GRACE_PERIOD_MS,
    promotionTimeoutMs: DEFAULT_PROMOTION_TIMEOUT_MS,
    renderGitTimeoutMs: DEFAULT_RENDER_GIT_TIMEOUT_MS,
    sshKnownHostsFile: '',
    now: () => new Date(),
    onPushed: async () => {},
    devSandbox: false,
    devSandboxInsecure: false,
    namespaceProvisioner: {},
    sharedInformers: {},
    ...options,
    informer: (resource, select = {}) => informer(resource, select),
    kindInformer: <K extends AppStudioKindName>(kind: K, select: InformerSelection = {}) =>
      informer(AppStudioKinds[kind].resource, select, kindParser<AppStudioCr<K>>(AppStudioKinds[kind])),
  };
}

/**
 * Start-up check: the API server must serve the App Studio kinds the features watch (their CRDs, and
 * Application from the App Studio service or manifests/components/appstudio-dependencies). Without it the
 * informers would never sync and the process would never become ready; a clear error is better.
 * @throws TerminalError naming the missing kind and the way out (GITOPS_APPSTUDIO=false).
 */
export async function requireAppStudioApi(
  kc: KubeConfig,
  options: { devSandbox?: boolean } = {},
): Promise<void> {
  for (const kind of [
    AppStudioKinds.Environment,
    AppStudioKinds.SnapshotEnvironmentBinding,
    AppStudioKinds.PromotionRun,
    AppStudioKinds.DeploymentTarget,
    AppStudioKinds.DeploymentTargetClaim,
    AppStudioKinds.DeploymentTargetClass,
    AppStudioKinds.Application,
    ...(options.devSandbox ? [AppStudioKinds.SpaceRequest] : []),
  ]) {
    try {
      await resolveResource(kc, kind.apiVersion, kind.kind);
    } catch (err) {
      if (errorCode(err) !== ErrorCode.kubeUnknownKind) throw err;
      throw new TerminalError(
        ErrorCode.kubeUnknownKind,
        kind === AppStudioKinds.SpaceRequest
          ? `GITOPS_APPSTUDIO_DEVSANDBOX is on but the API server does not serve SpaceRequest (${kind.apiVersion}): install the Dev Sandbox host operator or manifests/components/devsandbox-dependencies, or set GITOPS_APPSTUDIO_DEVSANDBOX=false`
          : `GITOPS_APPSTUDIO is on but the API server does not serve ${kind.kind} (${kind.apiVersion}): install the App Studio CRDs (manifests/components/appstudio; Application and Component: manifests/components/appstudio-dependencies) or set GITOPS_APPSTUDIO=false`,
      );
    }
  }
}
