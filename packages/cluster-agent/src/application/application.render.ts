/**
 * The desired Argo CD Application of an application row (docs/contracts/core-pipeline.md, "What the agent
 * derives when it applies an Application"). Pure: the caller reads the rows, this renders the object.
 * The row's `spec` comes from storage, so it is `unknown` here and parsed once with zod.
 */
import { SyncOption } from '@gitops/api';
import type { ApplicationWithDestination } from '@gitops/db';
import { ErrorCode, type KubeObject, TerminalError } from '@gitops/shared';
import { z } from 'zod';
import {
  AgentAnnotation,
  AgentLabel,
  ApplicationResource,
  ARGOCD_RESOURCES_FINALIZER,
  allowsClusterResources,
  appProjectName,
  clusterAppProjectName,
  IN_CLUSTER,
  isLabelValue,
  managedEnvironmentClusterName,
} from '../argocd.ts';

const syncPolicySchema = z.strictObject({
  automated: z
    .strictObject({
      prune: z.boolean().optional(),
      selfHeal: z.boolean().optional(),
      allowEmpty: z.boolean().optional(),
    })
    .optional(),
  syncOptions: z.array(z.string().min(1)).optional(),
  retry: z
    .strictObject({
      limit: z.number().int().optional(),
      backoff: z
        .strictObject({
          duration: z.string().optional(),
          factor: z.number().int().optional(),
          maxDuration: z.string().optional(),
        })
        .optional(),
    })
    .optional(),
});

/**
 * An Argo CD option section as the backend wrote it (Helm, Kustomize, directory, one ignoreDifferences entry):
 * an object, in Argo CD's own shape, passed through as it is (the backend checked each field: desired-application.ts).
 */
const argoCdSection = z.record(z.string(), z.json());

/** One source as the backend writes it: a path (Git, OCI) or a chart (Helm repository), `ref` in `sources`. */
const rowSourceSchema = z.strictObject({
  repoURL: z.string().min(1),
  path: z.string().optional(),
  chart: z.string().min(1).optional(),
  targetRevision: z.string().optional(),
  ref: z.string().min(1).optional(),
  helm: argoCdSection.optional(),
  kustomize: argoCdSection.optional(),
  directory: argoCdSection.optional(),
});

/**
 * `application.spec` as the backend writes it: Argo CD's spec without `project` and `destination.name`;
 * one `source`, or several `sources` (desired-application.ts).
 */
export const applicationRowSpecSchema = z.strictObject({
  source: rowSourceSchema.optional(),
  sources: z.array(rowSourceSchema).min(1).max(8).optional(),
  destination: z.strictObject({ namespace: z.string() }),
  syncPolicy: syncPolicySchema.optional(),
  ignoreDifferences: z.array(argoCdSection).max(32).optional(),
  revisionHistoryLimit: z.number().int().min(0).optional(),
});
export type ApplicationRowSpec = z.infer<typeof applicationRowSpecSchema>;

/**
 * The repository URLs of a spec (stored or live, so `unknown`): its `source`'s, or each of its `sources`'
 * (the tenant's AppProject must list every one of them).
 */
export function sourceRepoUrls(spec: unknown): string[] {
  return sourcesOf(spec).flatMap((s) =>
    typeof s.repoURL === 'string' && s.repoURL !== '' ? [s.repoURL] : [],
  );
}

/**
 * The repository URLs of a spec's sources that are charts of a Helm repository (`chart`) or of an OCI
 * registry (`oci://`): those Argo CD's repo-server reads into a chart cache shared by all its Applications.
 */
export function chartRepoUrls(spec: unknown): string[] {
  return sourcesOf(spec).flatMap((s) =>
    typeof s.repoURL === 'string' && (typeof s.chart === 'string' || /^oci:\/\//i.test(s.repoURL))
      ? [s.repoURL]
      : [],
  );
}

function sourcesOf(spec: unknown): { repoURL?: unknown; chart?: unknown }[] {
  const { source, sources } = (spec ?? {}) as { source?: unknown; sources?: unknown };
  return [source, ...(Array.isArray(sources) ? sources : [])].filter(
    (s): s is { repoURL?: unknown; chart?: unknown } => typeof s === 'object' && s !== null,
  );
}

/**
 * Parses a row's spec.
 * @throws TerminalError INVALID_OBJECT naming the bad fields (never their values).
 */
export function parseApplicationRowSpec(spec: unknown): ApplicationRowSpec {
  const result = applicationRowSpecSchema.safeParse(spec);
  if (result.success) return result.data;
  const problems = result.error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(spec)'}: ${issue.message}`);
  throw new TerminalError(ErrorCode.invalidObject, `malformed application spec: ${problems.join('; ')}`);
}

/** The Argo CD destination cluster name of a managed environment (NULL environment → ""). */
export type DestinationEnvironment =
  | { kind: 'Workspace' }
  /** `allowsClusterResources`: its credentials allow cluster-scoped objects (argocd.ts allowsClusterResources). */
  | { kind: 'External'; id: string; allowsClusterResources: boolean }
  | { kind: 'None' };

/** The Argo CD destination of an Application row's environment (its managed environment, if any). */
export function environmentOf(
  environment: ApplicationWithDestination['environment'],
): DestinationEnvironment {
  if (!environment) return { kind: 'None' };
  const { credentials } = environment;
  // A Workspace with credentials is the tenant's namespace on another cluster than this instance's: it is
  // reached through its cluster Secret, exactly like an External environment (namespace-scoped token).
  if (environment.kind === 'Workspace' && credentials === undefined) return { kind: 'Workspace' };
  return {
    kind: 'External',
    id: environment.id,
    allowsClusterResources:
      credentials !== undefined &&
      allowsClusterResources({
        namespaces: credentials.namespaces,
        clusterResources: credentials.cluster_resources,
      }),
  };
}

/**
 * True when a row's spec (stored, so `unknown`) asks Argo CD to create the destination namespace
 * (`CreateNamespace=true` among its sync options; Argo CD looks for the option, whatever else is listed).
 */
export function requestsNamespaceCreation(spec: unknown): boolean {
  const options = (spec as { syncPolicy?: { syncOptions?: unknown } } | null)?.syncPolicy?.syncOptions;
  return Array.isArray(options) && options.includes(SyncOption.CreateNamespaceTrue);
}

/**
 * The AppProject of an Application: the tenant's cluster-resource project for an External environment that
 * allows cluster-scoped objects, or for one that does not when the Application asks Argo CD to create its
 * destination namespace (`createsNamespace`: a Namespace is cluster-scoped, and Argo CD checks it against the
 * project's whitelist; the environment's namespaced cluster cache still refuses every cluster-scoped object
 * from the repository, and its token decides whether the namespace may be created). Every other destination
 * (in particular `in-cluster`, the host, where Argo CD acts with its own credentials) uses the main project,
 * which has no cluster resource whitelist.
 */
export function applicationProjectName(
  clusterUserId: string,
  environment: DestinationEnvironment,
  createsNamespace = false,
): string {
  return environment.kind === 'External' && (environment.allowsClusterResources || createsNamespace)
    ? clusterAppProjectName(clusterUserId)
    : appProjectName(clusterUserId);
}

export function destinationName(environment: DestinationEnvironment): string {
  switch (environment.kind) {
    case 'Workspace':
      return IN_CLUSTER;
    case 'External':
      return managedEnvironmentClusterName(environment.id);
    case 'None':
      return '';
  }
}

export interface ApplicationRenderInput {
  id: string;
  name: string;
  clusterUserId: string;
  spec: unknown;
  environment: DestinationEnvironment;
  /** The GitOpsDeployment it was produced from (api_cr_mapping), for humans. */
  owner?: { name: string; namespace: string } | undefined;
  /** The engine instance (Argo CD) namespace. */
  namespace: string;
  /** The row's `updated_at`, recorded on the Application (AgentAnnotation.RowVersion). */
  rowVersion: Date;
}

/**
 * One source as Argo CD stores it. "" means HEAD, as no field does; Argo CD drops empty strings whenever it
 * writes the Application, so sending one would look like drift after every sync (one more apply per deployment).
 */
function renderSource(source: z.infer<typeof rowSourceSchema>): Record<string, unknown> {
  const { targetRevision, ...rest } = source;
  return targetRevision ? { ...rest, targetRevision } : rest;
}

/**
 * Renders the Application we server-side apply: our labels, Argo CD's cascading finalizer, the tenant's
 * project, the destination cluster derived from the environment, and the row's source/sync policy.
 * @throws TerminalError when the row's spec is malformed.
 */
export function renderApplication(input: ApplicationRenderInput): KubeObject {
  const spec = parseApplicationRowSpec(input.spec);
  const labels: Record<string, string> = {
    [AgentLabel.DatabaseId]: input.id,
    [AgentLabel.ClusterUserId]: input.clusterUserId,
  };
  // Informational labels: only when they are valid label values (a CR name may be up to 253 characters).
  if (input.owner && isLabelValue(input.owner.name))
    labels[AgentLabel.GitOpsDeploymentName] = input.owner.name;
  if (input.owner && isLabelValue(input.owner.namespace)) {
    labels[AgentLabel.GitOpsDeploymentNamespace] = input.owner.namespace;
  }
  if ((spec.source === undefined) === (spec.sources === undefined)) {
    throw new TerminalError(
      ErrorCode.invalidObject,
      'malformed application spec: exactly one of source and sources must be set',
    );
  }
  const applicationSpec: Record<string, unknown> = {
    project: applicationProjectName(input.clusterUserId, input.environment, requestsNamespaceCreation(spec)),
  };
  if (spec.source) applicationSpec.source = renderSource(spec.source);
  if (spec.sources) applicationSpec.sources = spec.sources.map(renderSource);
  applicationSpec.destination = {
    name: destinationName(input.environment),
    namespace: spec.destination.namespace,
  };
  if (spec.syncPolicy !== undefined) applicationSpec.syncPolicy = spec.syncPolicy;
  if (spec.ignoreDifferences !== undefined) applicationSpec.ignoreDifferences = spec.ignoreDifferences;
  if (spec.revisionHistoryLimit !== undefined)
    applicationSpec.revisionHistoryLimit = spec.revisionHistoryLimit;
  return {
    apiVersion: ApplicationResource.apiVersion,
    kind: ApplicationResource.kind,
    metadata: {
      name: input.name,
      namespace: input.namespace,
      labels,
      annotations: { [AgentAnnotation.RowVersion]: input.rowVersion.toISOString() },
      finalizers: [ARGOCD_RESOURCES_FINALIZER],
    },
    spec: applicationSpec,
  };
}
