/** The pure parts of the PromotionRun controller (README: "PromotionRun"). */
import { createHash } from 'node:crypto';
import { DeploymentStrategy, PromotionRunMessage } from '@gitops/api';
import { formatDuration, type KubeCondition, setCondition } from '@gitops/shared';
import { parseConditions } from '../condition-pair.ts';
import type { BindingCr, EnvironmentCr, PromotionRunCr } from '../objects.ts';

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

/** What a step still waits for (the step's In Progress message), or undefined when every deployment is done. */
export function waitingFor(verdicts: readonly DeploymentVerdict[], expected: number): string | undefined {
  const waiting = verdicts.filter((v) => !v.done).map((v) => v.name);
  if (verdicts.length === 0 || verdicts.length < expected) return PromotionRunMessage.WaitingForDeployments;
  return waiting.length > 0 ? PromotionRunMessage.waitingFor(waiting) : undefined;
}

/**
 * The next environment of an automated promotion among `environments` (the run's namespace's): one whose
 * parentEnvironment is `done` (completed steps), of strategy AppStudioAutomated, not `started`; the first by
 * name.
 */
export function nextAutomatedEnvironment(
  environments: readonly EnvironmentCr[],
  done: ReadonlySet<string>,
  started: ReadonlySet<string>,
): string | undefined {
  return environments
    .filter(
      (env) =>
        done.has(env.spec?.parentEnvironment ?? '') &&
        env.spec?.deploymentStrategy === DeploymentStrategy.AppStudioAutomated &&
        !started.has(env.metadata.name),
    )
    .map((env) => env.metadata.name)
    .sort()[0];
}

/** The run's conditions with its single ErrorOccurred condition set (the original's own condition shape). */
export function errorCondition(
  run: PromotionRunCr,
  status: 'True' | 'False',
  reason: string,
  message: string,
  now: Date,
): KubeCondition[] {
  return setCondition(
    parseConditions(run.status?.conditions),
    { type: 'ErrorOccurred', status, reason, message },
    now,
  );
}
