/**
 * GitOpsDeployment → the desired Argo CD Application spec stored in `application.spec`
 * (docs/contracts/core-pipeline.md): without `project` and `destination.name`, which the agent derives.
 * Pure: parsing at the boundary, no I/O.
 */
import { GitOpsDeploymentMessage, GitOpsDeploymentType, SyncOption } from '@gitops/api';
import { z } from 'zod';
import type { JsonObject } from '../json.ts';
import { DNS1123_LABEL } from '../managed-environment/connection.check.ts';

/**
 * Why a `spec.destination.namespace` is refused: the original service's message, then the rule (the CRD's
 * admission message is the same text; the reconciler re-checks it for objects stored before that rule).
 */
export const INVALID_DESTINATION_NAMESPACE = `${GitOpsDeploymentMessage.InvalidDestinationNamespace}: spec.destination.namespace must be a namespace name (a DNS-1123 label of lower case letters, digits and '-', at most 63 characters)`;

const isNamespaceName = (namespace: string) => namespace.length <= 63 && DNS1123_LABEL.test(namespace);

/** What the backend reads from a GitOpsDeployment's spec (the CRD's admission rules, re-checked). */
export const gitOpsDeploymentSpecSchema = z.object({
  source: z.object({
    repoURL: z.string().min(1),
    path: z
      .string()
      .min(1)
      .refine((p) => p !== '/', "spec.source.path cannot be '/'"),
    targetRevision: z.string().optional(),
  }),
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
      syncOptions: z
        .array(z.enum([SyncOption.CreateNamespaceTrue, SyncOption.CreateNamespaceFalse]))
        .optional(),
    })
    .optional(),
  type: z.enum([GitOpsDeploymentType.Automated, GitOpsDeploymentType.Manual]),
});
export type ParsedGitOpsDeploymentSpec = z.infer<typeof gitOpsDeploymentSpecSchema>;

export type SpecParseResult = { ok: true; spec: ParsedGitOpsDeploymentSpec } | { ok: false; problem: string };

/** Parses `spec` of a GitOpsDeployment read from the API server (never throws). */
export function parseGitOpsDeploymentSpec(spec: unknown): SpecParseResult {
  const result = gitOpsDeploymentSpecSchema.safeParse(spec);
  if (result.success) return { ok: true, spec: result.data };
  const issue = result.error.issues[0];
  const path = ['spec', ...(issue?.path ?? []).map(String)].join('.');
  return { ok: false, problem: `${path}: ${issue?.message ?? 'invalid'}` };
}

/** The sync option Argo CD needs so that pruned resources are deleted in the background. */
export const PRUNE_PROPAGATION_BACKGROUND = 'PrunePropagationPolicy=background';

/**
 * The desired Argo CD Application spec of a GitOpsDeployment deploying to `destinationNamespace`:
 * `{source: {repoURL, path, targetRevision}, destination: {namespace}, syncPolicy?}`.
 * `targetRevision` is always present ("" = HEAD), so the stored document has one shape.
 */
export function desiredApplicationSpec(
  spec: ParsedGitOpsDeploymentSpec,
  destinationNamespace: string,
): JsonObject {
  const userOptions = spec.syncPolicy?.syncOptions ?? [];
  const desired: JsonObject = {
    source: {
      repoURL: spec.source.repoURL,
      path: spec.source.path,
      targetRevision: spec.source.targetRevision ?? '',
    },
    destination: { namespace: destinationNamespace },
  };
  if (spec.type === GitOpsDeploymentType.Automated) {
    desired.syncPolicy = {
      automated: { prune: true, selfHeal: true, allowEmpty: true },
      syncOptions: [PRUNE_PROPAGATION_BACKGROUND, ...userOptions],
      retry: { limit: -1, backoff: { duration: '5s', factor: 2, maxDuration: '3m' } },
    };
  } else if (userOptions.length > 0) {
    desired.syncPolicy = { syncOptions: [...userOptions] };
  }
  return desired;
}
