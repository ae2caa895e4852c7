/**
 * App Studio objects. The kinds served here arrive typed (`AppStudioCr<K>`: the kind's type generated from
 * its CRD, parsed once by the informer; the API server has checked it against that schema). The accessors
 * below read objects of other services (a Component, an Application) and untyped nested data defensively:
 * each returns a safe default, so bad input never crashes the process.
 */
import type { AppStudio, AppStudioKinds, OwnerReference } from '@gitops/api';
import type { KubeObject } from '@gitops/shared';

/** The name of an App Studio kind (`Environment`, `SnapshotEnvironmentBinding`, ...). */
export type AppStudioKindName = Exclude<keyof typeof AppStudioKinds, 'SpaceRequest'>;
/** An object of App Studio kind `K` as the API server returns it: its generated type, with a name. */
export type AppStudioCr<K extends AppStudioKindName> = Extract<AppStudio.AppStudioObject, { kind: K }> &
  KubeObject;
export type EnvironmentCr = AppStudioCr<'Environment'>;
export type SnapshotCr = AppStudioCr<'Snapshot'>;
export type BindingCr = AppStudioCr<'SnapshotEnvironmentBinding'>;
export type PromotionRunCr = AppStudioCr<'PromotionRun'>;
export type ApplicationCr = AppStudioCr<'Application'>;
export type TargetCr = AppStudioCr<'DeploymentTarget'>;
export type ClaimCr = AppStudioCr<'DeploymentTargetClaim'>;
export type ClassCr = AppStudioCr<'DeploymentTargetClass'>;

export type Json = Record<string, unknown>;

export function record(value: unknown): Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : {};
}

export function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

export function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

export function strings(value: unknown): string[] {
  return list(value).filter((v): v is string => typeof v === 'string');
}

export const specOf = (object: KubeObject): Json => record(object.spec);
export const statusOf = (object: KubeObject): Json => record(object.status);

export function ownerReferences(object: KubeObject): OwnerReference[] {
  return list(object.metadata.ownerReferences).flatMap((item) => {
    const r = record(item);
    return typeof r.kind === 'string' && typeof r.name === 'string'
      ? [
          {
            apiVersion: text(r.apiVersion),
            kind: r.kind,
            name: r.name,
            uid: text(r.uid),
            controller: r.controller === true,
          },
        ]
      : [];
  });
}

/** Milliseconds since the object was created (0 when unknown). */
export function ageMs(object: KubeObject, now: Date): number {
  const created = Date.parse(text(object.metadata.creationTimestamp));
  return Number.isFinite(created) ? Math.max(0, now.getTime() - created) : 0;
}

/** `spec.application` of a binding, a PromotionRun or a Component. */
export const applicationOf = (object: KubeObject): string => text(specOf(object).application);
/** `spec.environment` of a binding. */
export const environmentOf = (binding: KubeObject): string => text(specOf(binding).environment);

/** Whether `a` was created before `b` (creation time, then name, so exactly one of two is "earlier"). */
export function createdBefore(a: KubeObject, b: KubeObject): boolean {
  const ta = text(a.metadata.creationTimestamp);
  const tb = text(b.metadata.creationTimestamp);
  return ta === tb ? a.metadata.name < b.metadata.name : ta < tb;
}
