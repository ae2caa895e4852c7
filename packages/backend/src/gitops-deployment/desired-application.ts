/**
 * GitOpsDeployment → the desired Argo CD Application spec stored in `application.spec`
 * (docs/contracts/core-pipeline.md): without `project` and `destination.name`, which the agent derives.
 * Pure: parsing at the boundary, no I/O.
 */
import { GitOpsDeploymentMessage, GitOpsDeploymentType, SUPPORTED_SYNC_OPTIONS } from '@gitops/api';
import { z } from 'zod';
import type { JsonObject } from '../json.ts';
import { DNS1123_LABEL } from '../managed-environment/connection.check.ts';

/**
 * Why a `spec.destination.namespace` is refused: the original service's message, then the rule (the CRD's
 * admission message is the same text; the reconciler re-checks it for objects stored before that rule).
 */
export const INVALID_DESTINATION_NAMESPACE = `${GitOpsDeploymentMessage.InvalidDestinationNamespace}: spec.destination.namespace must be a namespace name (a DNS-1123 label of lower case letters, digits and '-', at most 63 characters)`;

const isNamespaceName = (namespace: string) => namespace.length <= 63 && DNS1123_LABEL.test(namespace);

const boundedString = (max: number) => z.string().max(max);
const duration = z.string().regex(/^([0-9]+(ms|s|m|h))+$/, 'must be a duration such as 5s, 2m or 1h30m');
/** At most this much of Helm values, inline or as an object once serialised (the CRD bounds the string). */
export const MAX_HELM_VALUES_BYTES = 65_536;

const helmSchema = z.object({
  valueFiles: z.array(boundedString(1024).min(1)).max(16).optional(),
  values: boundedString(MAX_HELM_VALUES_BYTES).optional(),
  valuesObject: z
    .record(z.string(), z.unknown())
    .refine(
      (values) => Buffer.byteLength(JSON.stringify(values)) <= MAX_HELM_VALUES_BYTES,
      `must be at most ${MAX_HELM_VALUES_BYTES} bytes once serialised`,
    )
    .optional(),
  parameters: z
    .array(
      z.object({
        name: boundedString(1024).min(1),
        value: boundedString(8192).optional(),
        forceString: z.boolean().optional(),
      }),
    )
    .max(128)
    .optional(),
  releaseName: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
    .max(53)
    .optional(),
  skipCrds: z.boolean().optional(),
});
const kustomizeSelector = z.object({
  group: boundedString(253).optional(),
  version: boundedString(63).optional(),
  kind: boundedString(63).optional(),
  name: boundedString(253).optional(),
  namespace: boundedString(63).optional(),
  labelSelector: boundedString(1024).optional(),
  annotationSelector: boundedString(1024).optional(),
});
const kustomizeSchema = z.object({
  images: z.array(boundedString(1024).min(1)).max(64).optional(),
  namePrefix: boundedString(63).optional(),
  nameSuffix: boundedString(63).optional(),
  commonLabels: z.record(z.string(), boundedString(63)).optional(),
  commonAnnotations: z.record(z.string(), boundedString(8192)).optional(),
  patches: z
    .array(
      z.object({
        patch: boundedString(65_536).optional(),
        path: boundedString(1024).optional(),
        target: kustomizeSelector.optional(),
      }),
    )
    .max(32)
    .optional(),
  namespace: z
    .string()
    .refine((n) => n === '' || isNamespaceName(n), 'must be a namespace name')
    .optional(),
});
const directorySchema = z.object({
  recurse: z.boolean().optional(),
  include: boundedString(1024).optional(),
  exclude: boundedString(1024).optional(),
});

/** The most sources one GitOpsDeployment may have (the CRD's `maxItems` of spec.sources). */
export const MAX_SOURCES = 8;

const helmRepositoryUrl = /^https?:\/\//i;

/** One source: a path of a Git or OCI repository, or a chart of a Helm repository (the CRD's rules, re-checked). */
const sourceSchema = z
  .object({
    repoURL: z.string().min(1),
    path: z
      .string()
      .refine((p) => p !== '/', "path cannot be '/'")
      .optional(),
    targetRevision: z.string().optional(),
    chart: z
      .string()
      .regex(/^[A-Za-z0-9][-A-Za-z0-9_.]*$/)
      .max(253)
      .optional(),
    ref: z
      .string()
      .regex(/^[A-Za-z0-9_-]+$/)
      .max(63)
      .optional(),
    helm: helmSchema.optional(),
    kustomize: kustomizeSchema.optional(),
    directory: directorySchema.optional(),
  })
  .refine(
    (source) => [source.helm, source.kustomize, source.directory].filter((x) => x !== undefined).length <= 1,
    'set at most one of helm, kustomize and directory',
  )
  .refine((source) => !(source.chart && source.path), 'chart and path are exclusive')
  .refine(
    (source) => !source.chart || helmRepositoryUrl.test(source.repoURL),
    'a chart needs a Helm repository (http:// or https://) in repoURL',
  )
  .refine(
    (source) => !source.chart || (!source.kustomize && !source.directory),
    'a chart takes helm, not kustomize or directory',
  );
type ParsedSource = z.infer<typeof sourceSchema>;

/** What the backend reads from a GitOpsDeployment's spec (the CRD's admission rules, re-checked). */
export const gitOpsDeploymentSpecSchema = z
  .object({
    source: sourceSchema
      .refine(
        (source) => source.chart !== undefined || !!source.path,
        'spec.source.path is a required field and it cannot be empty',
      )
      .refine((source) => source.ref === undefined, 'ref is only for one of spec.sources')
      .optional(),
    sources: z
      .array(
        sourceSchema
          .refine(
            (source) => source.chart !== undefined || source.ref !== undefined || !!source.path,
            'each of spec.sources needs a path, a chart or a ref',
          )
          .refine((source) => !(source.ref && source.chart), 'ref and chart are exclusive'),
      )
      .min(1)
      .max(MAX_SOURCES)
      .refine((sources) => {
        const refs = sources.flatMap((s) => (s.ref === undefined ? [] : [s.ref]));
        return new Set(refs).size === refs.length;
      }, 'each ref of spec.sources must be unique')
      .optional(),
    destination: z
      .object({
        environment: z.string().optional(),
        namespace: z
          .string()
          .refine((n) => n === '' || isNamespaceName(n), INVALID_DESTINATION_NAMESPACE)
          .optional(),
      })
      .optional(),
    syncPolicy: z
      .object({
        automated: z
          .object({
            prune: z.boolean().optional(),
            selfHeal: z.boolean().optional(),
            allowEmpty: z.boolean().optional(),
          })
          .optional(),
        retry: z
          .object({
            limit: z.number().int().min(-1).max(1000).optional(),
            backoff: z
              .object({
                duration: duration.optional(),
                factor: z.number().int().min(1).max(100).optional(),
                maxDuration: duration.optional(),
              })
              .optional(),
          })
          .optional(),
        syncOptions: z.array(z.enum(SUPPORTED_SYNC_OPTIONS)).max(16).optional(),
      })
      .optional(),
    ignoreDifferences: z
      .array(
        z.object({
          group: boundedString(253).optional(),
          kind: boundedString(63).min(1),
          name: boundedString(253).optional(),
          namespace: boundedString(63).optional(),
          jsonPointers: z.array(boundedString(1024).startsWith('/')).max(32).optional(),
          jqPathExpressions: z.array(boundedString(1024).min(1)).max(32).optional(),
          managedFieldsManagers: z.array(boundedString(128).min(1)).max(16).optional(),
        }),
      )
      .max(32)
      .optional(),
    revisionHistoryLimit: z.number().int().min(0).max(100).optional(),
    type: z.enum([GitOpsDeploymentType.Automated, GitOpsDeploymentType.Manual]),
  })
  .refine((spec) => (spec.source === undefined) !== (spec.sources === undefined), {
    message: 'set exactly one of spec.source and spec.sources',
    path: ['source'],
  });
export type ParsedGitOpsDeploymentSpec = z.infer<typeof gitOpsDeploymentSpecSchema>;

export type SpecParseResult = { ok: true; spec: ParsedGitOpsDeploymentSpec } | { ok: false; problem: string };

/**
 * The path of the first string of `value` (a value or a key, at any depth) holding NUL, which PostgreSQL cannot
 * store in JSON; undefined when there is none. Admission refuses control characters in most fields; this
 * covers the rest (Helm's valuesObject, parameters, Kustomize's fields) and objects stored before a rule.
 */
function nulPath(value: unknown, path: readonly string[]): readonly string[] | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? path : undefined;
  if (typeof value !== 'object' || value === null) return undefined;
  for (const [key, item] of Object.entries(value)) {
    // A key is named with its NUL written as \0: the path goes into a condition message.
    const itemPath = [...path, Array.isArray(value) ? `[${key}]` : key.replaceAll('\u0000', '\\0')];
    if (key.includes('\u0000')) return itemPath;
    const found = nulPath(item, itemPath);
    if (found) return found;
  }
  return undefined;
}

/** Parses `spec` of a GitOpsDeployment read from the API server (never throws). */
export function parseGitOpsDeploymentSpec(spec: unknown): SpecParseResult {
  const nul = nulPath(spec, ['spec']);
  if (nul)
    return {
      ok: false,
      problem: `${nul.join('.').replaceAll('.[', '[')}: must not contain the NUL character`,
    };
  const result = gitOpsDeploymentSpecSchema.safeParse(spec);
  if (result.success) return { ok: true, spec: result.data };
  const issue = result.error.issues[0];
  const path = ['spec', ...(issue?.path ?? []).map(String)].join('.');
  return { ok: false, problem: `${path}: ${issue?.message ?? 'invalid'}` };
}

/** The sync option Argo CD needs so that pruned resources are deleted in the background. */
export const PRUNE_PROPAGATION_BACKGROUND = 'PrunePropagationPolicy=background';

/** The retry of type automated when the GitOpsDeployment says none (the original service's). */
const DEFAULT_RETRY = { limit: -1, backoff: { duration: '5s', factor: 2, maxDuration: '3m' } };

/**
 * Why a spec that admission let through cannot become an Application here: a Kustomize namespace other than
 * the destination's (it would move every resource out of what the tenant targets).
 */
export function destinationProblem(
  spec: ParsedGitOpsDeploymentSpec,
  destinationNamespace: string,
): string | undefined {
  const named = spec.sources
    ? spec.sources.map((source, i) => [`spec.sources[${i}]`, source] as const)
    : spec.source
      ? [['spec.source', spec.source] as const]
      : [];
  for (const [field, source] of named) {
    const namespace = source.kustomize?.namespace;
    if (namespace && namespace !== destinationNamespace)
      return `${field}.kustomize.namespace must be the destination namespace ${destinationNamespace} (or empty), not ${namespace}`;
  }
  return undefined;
}

/** Keys whose value is undefined, '', false or an empty list or object are left out. */
type Entry = [string, unknown];
const present = ([, value]: Entry) =>
  !(
    value === undefined ||
    value === '' ||
    value === false ||
    (Array.isArray(value) && value.length === 0) ||
    (typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0)
  );
/**
 * `entries` without empty values, or undefined when none is left. Argo CD's Go types drop such values whenever
 * it writes an Application (omitempty), so sending them would look like drift after every sync.
 */
function compact(entries: Entry[]): JsonObject | undefined {
  const kept = entries.filter(present);
  return kept.length > 0 ? (Object.fromEntries(kept) as JsonObject) : undefined;
}

function helmOf(helm: NonNullable<ParsedSource['helm']>): JsonObject | undefined {
  return compact([
    ['valueFiles', helm.valueFiles],
    ['values', helm.values],
    // The user's values as written: a false or empty value in them means something.
    ['valuesObject', helm.valuesObject],
    [
      'parameters',
      helm.parameters?.map((p) =>
        compact([
          ['name', p.name],
          ['value', p.value],
          ['forceString', p.forceString],
        ]),
      ),
    ],
    ['releaseName', helm.releaseName],
    ['skipCrds', helm.skipCrds],
  ]);
}

function kustomizeOf(kustomize: NonNullable<ParsedSource['kustomize']>): JsonObject | undefined {
  return compact([
    ['images', kustomize.images],
    ['namePrefix', kustomize.namePrefix],
    ['nameSuffix', kustomize.nameSuffix],
    // Label and annotation values as written ('' is a value).
    ['commonLabels', kustomize.commonLabels],
    ['commonAnnotations', kustomize.commonAnnotations],
    [
      'patches',
      kustomize.patches?.map((p) =>
        compact([
          ['patch', p.patch],
          ['path', p.path],
          ['target', p.target && compact(Object.entries(p.target))],
        ]),
      ),
    ],
    ['namespace', kustomize.namespace],
  ]);
}

/**
 * One source in Argo CD's shape: `repoURL`, then `path` or `chart` (a chart of a Helm repository has no path),
 * `targetRevision` always ("" = HEAD, so the stored document has one shape), `ref` when named, and the options.
 */
function sourceOf(source: ParsedSource): JsonObject {
  const desired: JsonObject = { repoURL: source.repoURL };
  if (source.chart !== undefined) desired.chart = source.chart;
  else if (source.path !== undefined) desired.path = source.path;
  desired.targetRevision = source.targetRevision ?? '';
  if (source.ref !== undefined) desired.ref = source.ref;
  const helm = source.helm && helmOf(source.helm);
  const kustomize = source.kustomize && kustomizeOf(source.kustomize);
  const directory = source.directory && compact(Object.entries(source.directory));
  if (helm) desired.helm = helm;
  if (kustomize) desired.kustomize = kustomize;
  if (directory) desired.directory = directory;
  return desired;
}

/**
 * The sync options: the user's, and for type automated background prune propagation first unless the user
 * chose a propagation policy.
 */
function syncOptionsOf(spec: ParsedGitOpsDeploymentSpec): string[] {
  const user = spec.syncPolicy?.syncOptions ?? [];
  const ownPropagation = user.some((o) => o.startsWith('PrunePropagationPolicy='));
  return spec.type === GitOpsDeploymentType.Automated && !ownPropagation
    ? [PRUNE_PROPAGATION_BACKGROUND, ...user]
    : [...user];
}

function syncPolicyOf(spec: ParsedGitOpsDeploymentSpec): JsonObject | undefined {
  const retry = spec.syncPolicy?.retry;
  const userRetry =
    retry &&
    compact([
      ['limit', retry.limit === 0 ? undefined : retry.limit],
      ['backoff', retry.backoff && compact(Object.entries(retry.backoff))],
    ]);
  const syncOptions = syncOptionsOf(spec);
  if (spec.type === GitOpsDeploymentType.Automated) {
    const automated = spec.syncPolicy?.automated ?? {};
    // Each defaults to true (the original service's policy); a false one is left out, as Argo CD writes it.
    const policy: JsonObject = {
      automated:
        compact([
          ['prune', automated.prune ?? true],
          ['selfHeal', automated.selfHeal ?? true],
          ['allowEmpty', automated.allowEmpty ?? true],
        ]) ?? {},
      syncOptions,
      retry: userRetry ?? DEFAULT_RETRY,
    };
    return policy;
  }
  return compact([
    ['syncOptions', syncOptions],
    ['retry', userRetry],
  ]);
}

/**
 * The desired Argo CD Application spec of a GitOpsDeployment deploying to `destinationNamespace`:
 * `{source | sources: {repoURL, path | chart, targetRevision, ref?, helm? | kustomize? | directory?},
 * destination: {namespace}, syncPolicy?, ignoreDifferences?, revisionHistoryLimit?}` in Argo CD's shape
 * (docs/api.md). `targetRevision` is always present ("" = HEAD), so the stored document has one shape.
 */
export function desiredApplicationSpec(
  spec: ParsedGitOpsDeploymentSpec,
  destinationNamespace: string,
): JsonObject {
  // Exactly one of the two (the schema's rule).
  const desired: JsonObject = spec.sources ? { sources: spec.sources.map(sourceOf) } : {};
  if (spec.source) desired.source = sourceOf(spec.source);
  desired.destination = { namespace: destinationNamespace };
  const syncPolicy = syncPolicyOf(spec);
  if (syncPolicy) desired.syncPolicy = syncPolicy;
  const ignoreDifferences = spec.ignoreDifferences
    ?.map((entry) => compact(Object.entries(entry)))
    .filter((entry) => entry !== undefined);
  if (ignoreDifferences && ignoreDifferences.length > 0) desired.ignoreDifferences = ignoreDifferences;
  if (spec.revisionHistoryLimit !== undefined) desired.revisionHistoryLimit = spec.revisionHistoryLimit;
  return desired;
}
