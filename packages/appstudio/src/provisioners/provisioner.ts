/**
 * What a dynamic provisioner does (README: "Provisioners"): the binder calls `provision` for a Pending claim
 * of a class naming it that no existing target matches; the reclaimer calls `deprovision` for a target of
 * such a class being deleted under reclaim policy Delete, and removes the target's finalizer only once it
 * answers `gone`.
 */
import { DeploymentTargetAnnotation, DT_PROVISIONER_LABEL } from '@gitops/api';
import type { Logger } from '@gitops/shared';
import { annotationOf, type ClaimCr, type ClassCr, type TargetCr } from '../target-matching.ts';

export type Deprovisioned =
  | { kind: 'gone' }
  /** Still going; look again after this long (events may come sooner). */
  | { kind: 'waiting'; requeueAfter: number }
  /** Did not finish in time: the target becomes Failed and keeps waiting. */
  | { kind: 'failed'; requeueAfter: number }
  | { kind: 'error'; message: string };

export interface Provisioner {
  /** The `spec.provisioner` value of the classes it serves. */
  readonly name: string;
  /** Creates (or continues creating) a target for `claim`; returns a user-facing error, or undefined. */
  provision(claim: ClaimCr, deploymentTargetClass: ClassCr, logger: Logger): Promise<string | undefined>;
  /** Undoes what `provision` created for `target`. */
  deprovision(target: TargetCr, deploymentTargetClass: ClassCr, logger: Logger): Promise<Deprovisioned>;
}

/** The original's limit: a deprovisioning still going after 2 minutes makes the target Failed. */
export const DEPROVISION_TIMEOUT_MS = 2 * 60_000;

/** The labels of a target provisioned for `claim`: this shard's, and the claim's provisioner annotation as a label. */
export function provisionedTargetLabels(
  shardLabels: Readonly<Record<string, string>>,
  claim: ClaimCr,
): Record<string, string> {
  const provisionerLabel = annotationOf(claim, DeploymentTargetAnnotation.DTProvisioner);
  return { ...shardLabels, ...(provisionerLabel ? { [DT_PROVISIONER_LABEL]: provisionerLabel } : {}) };
}
