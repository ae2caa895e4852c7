/**
 * The SnapshotEnvironmentBinding integration tests' scenario (binding.int.test.ts, binding-status.int.test.ts):
 * a namespace with the Application `new-demo-app` and the Environment `staging`, the features started with a
 * 20 s Application grace period, and the moves of the component service (writing `status.components`).
 */
import type { KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll } from 'vitest';
import { type AppStudioFixture, createAppStudioFixture, Kind, statusOf } from './appstudio-fixture.ts';

export { specOf, statusOf } from './appstudio-fixture.ts';

export interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

export const pick = ({ type, status, reason, message }: Condition) => ({ type, status, reason, message });
export const bindingConditions = (b: KubeObject | undefined) =>
  ((statusOf(b).bindingConditions as Condition[] | undefined) ?? []).map(pick);

export const APP = 'new-demo-app';
export const REPO = 'https://github.com/redhat-appstudio/managed-gitops';

/** Registers the scenario's beforeAll/afterAll in the calling describe and returns its moves. */
export function useBindingScenario() {
  const f: AppStudioFixture = createAppStudioFixture();
  const scenario = { f, ns: '' };
  const ns = () => scenario.ns;

  const component = (name: string, path = `components/${name}/overlays/staging`) => ({
    name,
    gitopsRepository: { url: REPO, branch: 'main', path, generatedResources: [], commitID: '' },
  });
  const setComponents = (name: string, components: unknown[] | null) =>
    f.patch(Kind.SnapshotEnvironmentBinding, ns(), name, { status: { components } }, 'status');
  const binding = async (
    name: string,
    options: {
      environment?: string;
      application?: string;
      components?: unknown[];
      labels?: Record<string, string>;
    } = {},
  ) => {
    const created = await f.create(Kind.SnapshotEnvironmentBinding, ns(), name, {
      metadata: { labels: options.labels ?? {} },
      spec: {
        application: options.application ?? APP,
        environment: options.environment ?? 'staging',
        snapshot: 'my-snapshot',
        components: [{ name: 'component-a' }],
      },
    });
    if (options.components) await setComponents(name, options.components);
    return created;
  };
  const getBinding = (name: string) => f.get(Kind.SnapshotEnvironmentBinding, ns(), name);
  const deployment = (name: string) => f.get(Kind.GitOpsDeployment, ns(), name);
  const environment = (name: string, spec: Record<string, unknown> = {}) =>
    f.create(Kind.Environment, ns(), name, {
      spec: { displayName: '', deploymentStrategy: 'AppStudioAutomated', ...spec },
    });
  const firstCondition = async (name: string, message: string) =>
    eventually(`bindingConditions[0] of ${name} says "${message}"`, async () => {
      const c = bindingConditions(await getBinding(name));
      return c[0]?.message === message ? c : undefined;
    });

  beforeAll(async () => {
    scenario.ns = await f.createNamespace('appstudio-seb');
    await f.create(Kind.Application, scenario.ns, APP, { spec: { displayName: APP } });
    await environment('staging');
    // Long enough that a binding created just before its Application survives, short enough to test.
    await f.start({ applicationGracePeriodMs: 20_000 });
  });
  afterAll(() => f.cleanup());

  return { f, ns, component, binding, setComponents, getBinding, deployment, environment, firstCondition };
}
