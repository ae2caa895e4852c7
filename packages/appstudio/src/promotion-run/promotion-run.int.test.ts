/**
 * PromotionRun against the real API server: the reference's PromotionRun scenarios (controller unit tests
 * and e2e suite), with the design's fixes (success means Synced and Healthy at the component's commit; one
 * active run per application per namespace, later ones Waiting; a timeout on every wait; automated promotion
 * along parentEnvironment) named in the test names. The test plays the component service (it writes each
 * binding's status.components) and the core (it reports each GitOpsDeployment as Synced/Healthy or not).
 */
import assert from 'node:assert/strict';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  type AppStudioFixture,
  createAppStudioFixture,
  Kind,
  specOf,
  statusOf,
} from '../testing/appstudio-fixture.ts';

const APP = 'new-demo-app';
const REPO = 'https://github.com/redhat-appstudio/managed-gitops';
/** Short enough for the timeout test, long enough for the others on a loaded machine. */
const TIMEOUT_MS = 20_000;

const withoutTimes = (conditions: unknown) =>
  ((conditions as Record<string, unknown>[] | undefined) ?? []).map(({ type, message, status, reason }) => ({
    type,
    message,
    status,
    reason,
  }));

const f: AppStudioFixture = createAppStudioFixture();
let ns: string;
/** What the core reports per deployment (default: Synced/Healthy at the component's commit). */
const verdicts = new Map<string, { sync: string; health: string; revision?: string }>();
let actorStopped = false;
let actor: Promise<void> | undefined;

const environment = (name: string, spec: Record<string, unknown> = {}) =>
  f.create(Kind.Environment, ns, name, {
    spec: { displayName: '', deploymentStrategy: 'Manual', ...spec },
  });
const promotion = (name: string, spec: Record<string, unknown>) =>
  f.create(Kind.PromotionRun, ns, name, { spec: { snapshot: 'my-snapshot', application: APP, ...spec } });
const run = (name: string) => f.get(Kind.PromotionRun, ns, name);
const completed = (name: string, timeoutMs = 90_000) =>
  eventually(
    `${name} Complete`,
    async () => {
      const r = await run(name);
      return statusOf(r).state === 'Complete' ? r : undefined;
    },
    timeoutMs,
  );
const binding = (name: string, application: string, env: string, commitID = '') =>
  f
    .create(Kind.SnapshotEnvironmentBinding, ns, name, {
      spec: {
        application,
        environment: env,
        snapshot: 'older-snapshot',
        components: [{ name: 'component-a' }],
      },
    })
    .then(async (b) => {
      await f.patch(
        Kind.SnapshotEnvironmentBinding,
        ns,
        name,
        { status: { components: [componentStatus('component-a', env, commitID)] } },
        'status',
      );
      return b;
    });
const componentStatus = (component: string, env: string, commitID = '') => ({
  name: component,
  gitopsRepository: {
    url: REPO,
    branch: 'main',
    path: `components/${component}/overlays/${env}`,
    generatedResources: [],
    commitID,
  },
});

/** The test as the component service and the core, polling the namespace. */
async function playServices(): Promise<void> {
  while (!actorStopped) {
    try {
      for (const b of await f.list(Kind.SnapshotEnvironmentBinding, ns)) {
        if (statusOf(b).components) continue;
        const env = String(specOf(b).environment);
        const components = ((specOf(b).components as { name: string }[]) ?? []).map((c) =>
          componentStatus(c.name, env),
        );
        await f.patch(
          Kind.SnapshotEnvironmentBinding,
          ns,
          b.metadata.name,
          { status: { components } },
          'status',
        );
      }
      for (const d of await f.list(Kind.GitOpsDeployment, ns)) {
        const verdict = verdicts.get(d.metadata.name) ?? { sync: 'Synced', health: 'Healthy' };
        const status = statusOf(d) as {
          sync?: { status?: string; revision?: string };
          health?: { status?: string };
        };
        const revision = verdict.revision ?? '';
        if (
          status.sync?.status === verdict.sync &&
          status.health?.status === verdict.health &&
          (status.sync?.revision ?? '') === revision
        )
          continue;
        await f.patch(
          Kind.GitOpsDeployment,
          ns,
          d.metadata.name,
          { status: { sync: { status: verdict.sync, revision }, health: { status: verdict.health } } },
          'status',
        );
      }
    } catch {
      // Objects come and go while the controllers work: the next round sees the current state.
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

beforeAll(async () => {
  ns = await f.createNamespace('appstudio-pr');
  await f.create(Kind.Application, ns, APP, { spec: { displayName: APP } });
  await f.create(Kind.Snapshot, ns, 'my-snapshot', {
    spec: {
      application: APP,
      components: [{ name: 'component-a', containerImage: 'images.example/org/a@sha256:1' }],
    },
  });
  await f.create(Kind.Component, ns, 'comp1', { spec: { componentName: 'component-a', application: APP } });
  await environment('staging');
  await environment('prod');
  await f.start({ promotionTimeoutMs: TIMEOUT_MS });
  actor = playServices();
});
afterAll(async () => {
  actorStopped = true;
  await actor;
  await f.cleanup();
});

describe('PromotionRun controller: manual promotion and what stops it', () => {
  it('a manual promotion to prod points the binding at the snapshot and completes with exactly the original final status', async () => {
    await binding('appa-prod-binding', APP, 'prod');
    await promotion('to-prod', { manualPromotion: { targetEnvironment: 'prod' } });
    const done = await completed('to-prod');
    const status = statusOf(done);
    assert.equal(status.state, 'Complete');
    assert.equal(status.completionResult, 'Success');
    assert.deepEqual(status.activeBindings, ['appa-prod-binding']);
    assert.deepEqual(status.environmentStatus, [
      {
        step: 1,
        environmentName: 'prod',
        status: 'Success',
        displayStatus: 'All GitOpsDeployments are Synced/Healthy',
      },
    ]);
    assert.deepEqual(withoutTimes(status.conditions), [
      { type: 'ErrorOccurred', message: '', status: 'False', reason: '' },
    ]);
    assert.equal(
      specOf(await f.get(Kind.SnapshotEnvironmentBinding, ns, 'appa-prod-binding')).snapshot,
      'my-snapshot',
    );
    assert.equal(
      await f.get(Kind.SnapshotEnvironmentBinding, ns, 'new-demo-app-prod-generated-binding'),
      undefined,
      'no binding is generated when one for (application, target) exists, whatever its name',
    );
  });

  it('without a binding for (application, target) one is generated from the Components, even when bindings for other environments or applications exist', async () => {
    await environment('qa');
    await binding('appa-staging-for-qa-test', APP, 'staging');
    await binding('other-app-qa', 'app-x', 'qa');
    await f.create(Kind.Application, ns, 'app-x', { spec: { displayName: 'x' } });
    await promotion('to-qa', { manualPromotion: { targetEnvironment: 'qa' } });
    const generated = await eventually('the generated binding', () =>
      f.get(Kind.SnapshotEnvironmentBinding, ns, 'new-demo-app-qa-generated-binding'),
    );
    assert.equal(generated.metadata.labels?.['appstudio.application'], APP);
    assert.equal(generated.metadata.labels?.['appstudio.environment'], 'qa');
    assert.deepEqual(specOf(generated), {
      application: APP,
      environment: 'qa',
      snapshot: 'my-snapshot',
      components: [{ name: 'comp1' }],
    });
    assert.equal(statusOf(await completed('to-qa')).completionResult, 'Success');
  });

  it('an empty target environment is "Target Environment has invalid value."', async () => {
    await promotion('no-target', { manualPromotion: { targetEnvironment: '' } });
    const r = await eventually('the condition', async () => {
      const c = withoutTimes(statusOf(await run('no-target')).conditions);
      return c.length > 0 ? c : undefined;
    });
    assert.deepEqual(r, [
      {
        type: 'ErrorOccurred',
        message: 'Target Environment has invalid value.',
        status: 'True',
        reason: 'ErrorOccurred',
      },
    ]);
  });

  it('an application without Components is reported instead of only logged (fix)', async () => {
    await promotion('no-components', {
      application: 'lonely-app',
      manualPromotion: { targetEnvironment: 'prod' },
    });
    await eventually('the condition', async () =>
      withoutTimes(statusOf(await run('no-components')).conditions).some(
        (c) =>
          c.status === 'True' &&
          c.message === "no Component of application 'lonely-app' exists, so no binding can be generated",
      ),
    );
  });

  it('a missing Snapshot is reported', async () => {
    await environment('snap-env');
    await f.create(Kind.Application, ns, 'snap-app', { spec: { displayName: 'snap' } });
    await binding('snap-binding', 'snap-app', 'snap-env');
    await promotion('no-snapshot', {
      snapshot: 'missing-snapshot',
      application: 'snap-app',
      manualPromotion: { targetEnvironment: 'snap-env' },
    });
    await eventually('the condition', async () =>
      withoutTimes(statusOf(await run('no-snapshot')).conditions).some(
        (c) => c.message === 'Snapshot: missing-snapshot referred in Binding: snap-binding does not exist.',
      ),
    );
  });
});

describe('PromotionRun controller: commits, timeouts, queues and automated promotion', () => {
  it('Synced and Healthy at another commit than the component status is not done (fix: the original counted it, and anything not Synced, as done)', async () => {
    await environment('commit-env');
    await f.create(Kind.Application, ns, 'commit-app', { spec: { displayName: 'c' } });
    await binding('commit-binding', 'commit-app', 'commit-env', 'abc123');
    const gd = 'commit-binding-commit-app-commit-env-component-a';
    verdicts.set(gd, { sync: 'Synced', health: 'Healthy', revision: 'old-commit' });
    await promotion('at-commit', {
      application: 'commit-app',
      manualPromotion: { targetEnvironment: 'commit-env' },
    });
    await eventually('In Progress, waiting for the deployment', async () => {
      const steps = statusOf(await run('at-commit')).environmentStatus as
        | { displayStatus: string }[]
        | undefined;
      return (
        steps?.[0]?.displayStatus === `Waiting for following GitOpsDeployments to be Synced/Healthy: ${gd}`
      );
    });
    verdicts.set(gd, { sync: 'Synced', health: 'Healthy', revision: 'abc123' });
    assert.equal(statusOf(await completed('at-commit')).completionResult, 'Success');
  });

  it('a binding replaced after the run started is reported with the original message', async () => {
    await environment('swap-env');
    await f.create(Kind.Application, ns, 'swap-app', { spec: { displayName: 'swap' } });
    await binding('swap-one', 'swap-app', 'swap-env');
    verdicts.set('swap-one-swap-app-swap-env-component-a', { sync: 'OutOfSync', health: 'Progressing' });
    await promotion('swap', { application: 'swap-app', manualPromotion: { targetEnvironment: 'swap-env' } });
    await eventually('the run Active on swap-one', async () => {
      const s = statusOf(await run('swap'));
      return s.state === 'Active' && JSON.stringify(s.activeBindings) === '["swap-one"]';
    });
    await f.remove(Kind.SnapshotEnvironmentBinding, ns, 'swap-one');
    await binding('swap-two', 'swap-app', 'swap-env');
    await eventually('the condition', async () =>
      withoutTimes(statusOf(await run('swap')).conditions).some(
        (c) =>
          c.status === 'True' &&
          c.message ===
            'The binding changed after the PromotionRun first start. The .spec fields of the PromotionRun are immutable, and should not be changed after being created. old-binding: swap-one, new-binding: swap-two',
      ),
    );
  });

  it('a target that never becomes Healthy ends Failure at GITOPS_PROMOTION_TIMEOUT with the message', async () => {
    await environment('sick-env');
    await f.create(Kind.Application, ns, 'sick-app', { spec: { displayName: 's' } });
    await binding('sick-binding', 'sick-app', 'sick-env');
    verdicts.set('sick-binding-sick-app-sick-env-component-a', { sync: 'Synced', health: 'Degraded' });
    await promotion('never-healthy', {
      application: 'sick-app',
      manualPromotion: { targetEnvironment: 'sick-env' },
    });
    const done = await completed('never-healthy', TIMEOUT_MS + 90_000);
    const message = 'Promotion Failed. Could not be completed in 20s.';
    assert.equal(statusOf(done).completionResult, 'Failure');
    assert.deepEqual(statusOf(done).environmentStatus, [
      { step: 1, environmentName: 'sick-env', status: 'Failed', displayStatus: message },
    ]);
    assert.deepEqual(withoutTimes(statusOf(done).conditions), [
      { type: 'ErrorOccurred', message, status: 'True', reason: 'ErrorOccurred' },
    ]);
  });

  it('a second run of the same application waits for the first, saying which, then runs by itself (fix: the original blocked it for good)', async () => {
    await environment('queue-env');
    await f.create(Kind.Application, ns, 'queue-app', { spec: { displayName: 'q' } });
    await binding('queue-binding', 'queue-app', 'queue-env');
    const gd = 'queue-binding-queue-app-queue-env-component-a';
    verdicts.set(gd, { sync: 'OutOfSync', health: 'Progressing' });
    const spec = { application: 'queue-app', manualPromotion: { targetEnvironment: 'queue-env' } };
    await promotion('first-run', spec);
    await eventually('the first run Active', async () => statusOf(await run('first-run')).state === 'Active');
    await promotion('second-run', spec);
    await eventually('the second run Waiting', async () => {
      const r = await run('second-run');
      return (
        statusOf(r).state === 'Waiting' &&
        withoutTimes(statusOf(r).conditions)[0]?.message ===
          "Waiting for PromotionRun 'first-run' of application 'queue-app' to complete"
      );
    });
    verdicts.delete(gd);
    assert.equal(statusOf(await completed('first-run')).completionResult, 'Success');
    assert.equal(statusOf(await completed('second-run')).completionResult, 'Success');
  });

  it('automated promotion follows parentEnvironment across three environments, one Success step each, in order (fix: the original rejected it)', async () => {
    await f.create(Kind.Application, ns, 'chain-app', { spec: { displayName: 'chain' } });
    await f.create(Kind.Component, ns, 'chain-comp', {
      spec: { componentName: 'web', application: 'chain-app' },
    });
    await environment('chain-dev', { deploymentStrategy: 'AppStudioAutomated' });
    await environment('chain-stage', {
      deploymentStrategy: 'AppStudioAutomated',
      parentEnvironment: 'chain-dev',
    });
    await environment('chain-prod', {
      deploymentStrategy: 'AppStudioAutomated',
      parentEnvironment: 'chain-stage',
    });
    await environment('chain-manual', { deploymentStrategy: 'Manual', parentEnvironment: 'chain-dev' });
    await promotion('chain', {
      application: 'chain-app',
      automatedPromotion: { initialEnvironment: 'chain-dev' },
    });
    const done = await completed('chain', 180_000);
    assert.equal(statusOf(done).completionResult, 'Success');
    assert.deepEqual(statusOf(done).environmentStatus, [
      {
        step: 1,
        environmentName: 'chain-dev',
        status: 'Success',
        displayStatus: 'All GitOpsDeployments are Synced/Healthy',
      },
      {
        step: 2,
        environmentName: 'chain-stage',
        status: 'Success',
        displayStatus: 'All GitOpsDeployments are Synced/Healthy',
      },
      {
        step: 3,
        environmentName: 'chain-prod',
        status: 'Success',
        displayStatus: 'All GitOpsDeployments are Synced/Healthy',
      },
    ]);
    assert.equal(
      await f.get(Kind.SnapshotEnvironmentBinding, ns, 'chain-app-chain-manual-generated-binding'),
      undefined,
    );
  });
});
