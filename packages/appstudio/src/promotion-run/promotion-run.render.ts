/** The pure parts of the PromotionRun controller (README: "PromotionRun"). */
import { createHash } from 'node:crypto';
import { PromotionRunMessage } from '@gitops/api';
import { formatDuration } from '@gitops/shared';
import type { BindingCr, PromotionRunCr } from '../objects.ts';

/**
 * The binding a PromotionRun generates when (application, environment) has none:
 * `<application>-<environment>-generated-binding` in lower case, or, when longer than 250 characters,
 * `generated-environment-binding-<SHA-256 hex of that name>`.
 */
export function generatedBindingName(application: string, environment: string): string {
  const name = `${application}-${environment}-generated-binding`.toLowerCase();
  if (name.length <= 250) return name;
  return `generated-environment-binding-${createHash('sha256').update(name).digest('hex')}`;
}

/** "10 Minutes" as the original said it, else the duration (`90s`). */
export function timeoutText(ms: number): string {
  return ms % 60_000 === 0 ? `${ms / 60_000} Minutes` : formatDuration(ms);
}

export const timedOutMessage = (ms: number) => PromotionRunMessage.timedOut(timeoutText(ms));

export interface EnvironmentStep {
  step: number;
  environmentName: string;
  status: string;
  displayStatus: string;
}

export function environmentStatusOf(status: PromotionRunCr['status']): EnvironmentStep[] {
  return (status?.environmentStatus ?? []).map(({ step, environmentName, status, displayStatus }) => ({
    step,
    environmentName,
    status,
    displayStatus,
  }));
}

/** Upserts the entry of `environment`: overwritten in place, or appended with the next step number. */
export function withEnvironmentStatus(
  steps: readonly EnvironmentStep[],
  environment: string,
  status: string,
  displayStatus: string,
): EnvironmentStep[] {
  const index = steps.findIndex((s) => s.environmentName === environment);
  if (index >= 0) return steps.map((s, i) => (i === index ? { ...s, status, displayStatus } : s));
  const last = steps.reduce((max, s) => Math.max(max, s.step), 0);
  return [...steps, { step: last + 1, environmentName: environment, status, displayStatus }];
}

export interface DeploymentVerdict {
  name: string;
  done: boolean;
}

/**
 * Whether each of a binding's deployments is promoted: Synced **and** Healthy and, when the component
 * status carries a commitID, synced at that commit (appstudio README promise 4; the original counted anything but
 * "Synced and not Healthy" as done).
 */
export function deploymentVerdicts(bindingStatus: BindingCr['status']): DeploymentVerdict[] {
  const commits = new Map(
    (bindingStatus?.components ?? []).map((c) => [c.name, c.gitopsRepository.commitID]),
  );
  return (bindingStatus?.gitopsDeployments ?? []).map((d) => {
    const expected = commits.get(d.componentName) ?? '';
    return {
      name: d.gitopsDeployment ?? '',
      done:
        d.syncStatus === 'Synced' && d.health === 'Healthy' && (expected === '' || d.commitID === expected),
    };
  });
}
