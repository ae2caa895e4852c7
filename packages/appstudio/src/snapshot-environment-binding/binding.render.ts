/**
 * The pure part of the binding controller: the GitOpsDeployment each `status.components[]` entry becomes
 * (name rule, labels, source, destination) and the status roll-up. README: "SnapshotEnvironmentBinding".
 */
import { createHash } from 'node:crypto';
import {
  AppStudioKinds,
  AppStudioLabel,
  COPIED_LABEL_MARKER,
  ComponentDeploymentConditionType,
  ComponentDeploymentReason,
  componentsDeployedMessage,
  controllerReference,
  Kinds,
} from '@gitops/api';
import { jsonEqual, type KubeCondition, type KubeObject, nextCondition } from '@gitops/shared';
import { type BindingCr, type Json, record, text } from '../objects.ts';

/** Kubernetes allows 253; the original keeps generated names at most this long. */
const MAX_NAME_LENGTH = 250;
const HASHED_PREFIX_LENGTH = 180;

/**
 * `<binding>-<application>-<environment>-<component>`; when longer than 250 characters
 * `<binding>-<component>`; when that is still too long, its first 180 characters, `-`, and the SHA-256 (hex)
 * of the full first form (245 characters).
 */
export function gitOpsDeploymentName(
  binding: string,
  application: string,
  environment: string,
  component: string,
): string {
  const full = `${binding}-${application}-${environment}-${component}`;
  if (full.length <= MAX_NAME_LENGTH) return full;
  const short = `${binding}-${component}`;
  if (short.length <= MAX_NAME_LENGTH) return short;
  return `${short.slice(0, HASHED_PREFIX_LENGTH)}-${createHash('sha256').update(full).digest('hex')}`;
}

export interface ComponentStatus {
  name: string;
  url: string;
  branch: string;
  path: string;
  commitID: string;
}

/** `status.components` as written by the component service (entries without a name are ignored). */
export function componentsOf(status: BindingCr['status']): ComponentStatus[] {
  return (status?.components ?? [])
    .filter((c) => c.name !== '')
    .map(({ name, gitopsRepository: { url, branch, path, commitID } }) => ({
      name,
      url,
      branch,
      path,
      commitID,
    }));
}

/** The first component name that appears twice, if any. */
export function duplicateComponent(components: readonly ComponentStatus[]): string | undefined {
  const seen = new Set<string>();
  for (const c of components) {
    if (seen.has(c.name)) return c.name;
    seen.add(c.name);
  }
  return undefined;
}

export type Destination = { environment?: string; namespace?: string };

/** A label value the API server accepts (at most 63 characters, alphanumeric ends, `-_.` inside). */
const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
export const isLabelValue = (value: string) => value.length <= 63 && labelValue.test(value);

/**
 * The labels of a generated GitOpsDeployment: the binding's labels whose key contains
 * `appstudio.openshift.io` (the original's test, kept), then the three identity labels, then the shard.
 */
export function deploymentLabels(
  binding: KubeObject,
  application: string,
  environment: string,
  component: string,
  shardLabels: Readonly<Record<string, string>>,
): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const [key, value] of Object.entries(binding.metadata.labels ?? {})) {
    if (key.includes(COPIED_LABEL_MARKER)) labels[key] = value;
  }
  labels[AppStudioLabel.Application] = application;
  labels[AppStudioLabel.Component] = component;
  labels[AppStudioLabel.Environment] = environment;
  return { ...labels, ...shardLabels };
}

/** The GitOpsDeployment for one component (what is server-side applied). */
export function desiredDeployment(options: {
  binding: KubeObject;
  application: string;
  environment: string;
  component: ComponentStatus;
  destination: Destination;
  shardLabels: Readonly<Record<string, string>>;
}): KubeObject {
  const { binding, application, environment, component } = options;
  return {
    apiVersion: Kinds.GitOpsDeployment.apiVersion,
    kind: Kinds.GitOpsDeployment.kind,
    metadata: {
      name: gitOpsDeploymentName(binding.metadata.name, application, environment, component.name),
      namespace: binding.metadata.namespace,
      labels: deploymentLabels(binding, application, environment, component.name, options.shardLabels),
      ownerReferences: [
        controllerReference(AppStudioKinds.SnapshotEnvironmentBinding, binding, { blockOwnerDeletion: true }),
      ],
    },
    spec: {
      source: { repoURL: component.url, path: component.path, targetRevision: component.branch },
      // An empty destination (the binding's own namespace) is left out: applied as `{}` the API server
      // reads it as null.
      ...(Object.keys(options.destination).length > 0 ? { destination: options.destination } : {}),
      type: 'automated',
    },
  };
}

/** The labels a comparison looks at: those containing `appstudio.openshift.io`, and the shard's. */
function ownedLabels(
  labels: Record<string, string> | undefined,
  shardLabels: Readonly<Record<string, string>>,
) {
  return Object.fromEntries(
    Object.entries(labels ?? {})
      .filter(([key]) => key.includes(COPIED_LABEL_MARKER) || key in shardLabels)
      .sort(([a], [b]) => a.localeCompare(b)),
  );
}

function comparableSpec(spec: unknown): Json {
  const s = record(spec);
  const source = record(s.source);
  const destination = record(s.destination);
  return {
    source: {
      repoURL: text(source.repoURL),
      path: text(source.path),
      targetRevision: text(source.targetRevision),
    },
    destination: { environment: text(destination.environment), namespace: text(destination.namespace) },
    type: text(s.type),
  };
}

/** True when `live` already has the desired spec and appstudio labels (no write needed). */
export function deploymentUpToDate(
  live: KubeObject,
  desired: KubeObject,
  shardLabels: Readonly<Record<string, string>>,
): boolean {
  return (
    jsonEqual(comparableSpec(live.spec), comparableSpec(desired.spec)) &&
    jsonEqual(
      ownedLabels(live.metadata.labels, shardLabels),
      ownedLabels(desired.metadata.labels, shardLabels),
    ) &&
    live.metadata.ownerReferences !== undefined
  );
}

export interface DeploymentStatusEntry {
  componentName: string;
  gitopsDeployment: string;
  syncStatus: string;
  health: string;
  commitID: string;
}

/** One `status.gitopsDeployments` entry from the live deployment (empty strings until the core fills them). */
export function deploymentStatusEntry(
  component: string,
  name: string,
  live: KubeObject | undefined,
): DeploymentStatusEntry {
  const status = record(live?.status);
  return {
    componentName: component,
    gitopsDeployment: name,
    syncStatus: text(record(status.sync).status),
    health: text(record(status.health).status),
    commitID: text(record(status.sync).revision),
  };
}

/** `componentDeploymentConditions`: exactly one AllComponentsDeployed condition, "N of M components deployed". */
export function componentDeploymentConditions(
  existing: readonly KubeCondition[],
  entries: readonly DeploymentStatusEntry[],
  now: Date,
): KubeCondition[] {
  const synced = entries.filter((e) => e.syncStatus === 'Synced').length;
  const previous = existing.length === 1 ? existing[0] : undefined;
  return [
    nextCondition(
      previous?.type === ComponentDeploymentConditionType.AllComponentsDeployed ? previous : undefined,
      {
        type: ComponentDeploymentConditionType.AllComponentsDeployed,
        status: synced === entries.length ? 'True' : 'False',
        reason:
          synced === entries.length
            ? ComponentDeploymentReason.CommitsSynced
            : ComponentDeploymentReason.CommitsUnsynced,
        message: componentsDeployedMessage(synced, entries.length),
      },
      now,
    ),
  ];
}
