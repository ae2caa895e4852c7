/**
 * Tier 3b: two engine instances (two real Argo CDs, each with its own agent) behind one backend. Tenants are
 * placed by label and by load; a tenant moved between instances keeps its deployed resources (never pruned,
 * never re-created) and the new instance's Argo CD takes them over; a label naming an unknown instance moves
 * nothing and says so.
 */
import assert from 'node:assert/strict';
import { Label, TenantMoveEventReason } from '@gitops/api';
import { manifest } from '@gitops/local-env';
import { HttpMethod, type KubeObject, kubeRequest } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, it } from 'vitest';
import { type GitOpsDeployment, get, mergePatch, paths, watchEvents } from '../fixture/kube.ts';
import {
  CONVERGE_MS,
  type DeploymentStatus,
  gitSource,
  syncedAndHealthy,
  useRealSystem,
} from '../fixture/real-argo-cd.ts';

describe('tier 3b: two Argo CD instances', () => {
  // An instance whose agents are away is reported after 3 s (default 2 min).
  const f = useRealSystem({
    secondInstance: true,
    backendEnv: { GITOPS_ENGINE_INSTANCE_AWAY_AFTER: '3s' },
  });
  let a: string;
  let b: string;

  beforeAll(() => {
    a = f.system.engineInstanceName;
    b = f.system.secondEngineInstanceName;
  });

  const engineInstanceOf = (status: object) => (status as { engineInstance?: string }).engineInstance;
  /** Synced and Healthy, reported as deployed through `instance`. */
  const syncedOn = (instance: string) => (status: DeploymentStatus) =>
    syncedAndHealthy(status) && engineInstanceOf(status) === instance;
  /** Given a tenant on instance a whose deployment `app` of one ConfigMap `configMap` is Synced/Healthy there. */
  async function deployedOnA(name: string, configMap: string) {
    const tenant = await f.given.tenant(name, { [Label.EngineInstance]: a });
    const repo = await f.given.repository(name, { 'app/cm.yaml': manifest.configMap(configMap, { k: 'v' }) });
    const gd = await f.when.deployed(tenant, 'app', gitSource(repo, 'app'));
    await f.expect.deployment(gd).is('Synced/Healthy on a', syncedOn(a));
    return { tenant, gd };
  }
  const argoCdNamespaceOf = (instance: string) =>
    instance === a ? f.system.argoCdNamespace : f.system.secondArgoCdNamespace;
  const applicationIn = (namespace: string, gd: GitOpsDeployment) =>
    get(f.system.kc, paths.application(namespace, `gitopsdepl-${gd.metadata.uid}`));
  const eventsOf = async (namespace: string) => {
    const list = (await kubeRequest(f.system.kc, {
      method: HttpMethod.GET,
      path: '/api/v1/namespaces/default/events',
      query: { fieldSelector: `involvedObject.name=${namespace},involvedObject.kind=Namespace` },
    })) as { items?: (KubeObject & { reason?: string; message?: string })[] };
    return list.items ?? [];
  };

  it('places tenants by label and by load; each deploys through its own Argo CD', async () => {
    // Given a tenant whose namespace asks for instance b, and one that asks for nothing
    const labelled = await f.given.tenant('on-b', { [Label.EngineInstance]: b });
    const unlabelled = await f.given.tenant('by-load');
    const repo = await f.given.repository('placement', {
      'app/cm.yaml': manifest.configMap('placed', { k: 'v' }),
    });
    // When the labelled one deploys first, then the other
    const first = await f.when.deployed(labelled, 'app', gitSource(repo, 'app'));
    const onB = await f.expect.deployment(first).is('Synced/Healthy on b', syncedOn(b));
    assert.equal(engineInstanceOf(onB), b);
    const second = await f.when.deployed(unlabelled, 'app', gitSource(repo, 'app'));
    // Then the first is on b (the label), the second on a (b holds one application, a none)
    await f.expect.deployment(second).is('Synced/Healthy on a', syncedOn(a));
    await f.expect.application(first, () => true, f.system.secondArgoCdNamespace);
    await f.expect.application(second, () => true, f.system.argoCdNamespace);
    assert.equal(await applicationIn(f.system.argoCdNamespace, first), undefined);
    assert.equal(await applicationIn(f.system.secondArgoCdNamespace, second), undefined);
    await f.expect.object(labelled, 'ConfigMap', 'placed');
    await f.expect.object(unlabelled, 'ConfigMap', 'placed');
  });

  it('moves a tenant when its label changes: resources stay (same object), the new Argo CD takes them over', async () => {
    // Given a tenant on a with two deployments, Synced and Healthy
    const tenant = await f.given.tenant('mover', { [Label.EngineInstance]: a });
    const repo = await f.given.repository('mover', {
      'one/cm.yaml': manifest.configMap('one', { v: '1' }),
      'two/cm.yaml': manifest.configMap('two', { v: '1' }),
    });
    const one = await f.when.deployed(tenant, 'one', gitSource(repo, 'one'));
    const two = await f.when.deployed(tenant, 'two', gitSource(repo, 'two'), { type: 'manual' });
    await f.expect.deployment(one).is('Synced/Healthy on a', syncedOn(a));
    await f.system.createSyncRun(tenant, 'first-sync', { gitopsDeploymentName: 'two' });
    await f.expect.deployment(two).is('Synced/Healthy on a', syncedOn(a));
    const before = {
      one: await f.expect.object(tenant, 'ConfigMap', 'one'),
      two: await f.expect.object(tenant, 'ConfigMap', 'two'),
    };
    // (every version of the two ConfigMaps from now on is recorded: a delete would show)
    const deletes: string[] = [];
    const stopWatch = await watchConfigMaps(tenant, (type, name) => {
      if (type === 'DELETED') deletes.push(name);
    });

    // When the namespace's label names b
    await mergePatch(f.system.kc, paths.namespace(tenant), {
      metadata: { labels: { [Label.EngineInstance]: b } },
    });

    // Then both deployments report b, Synced and Healthy, through b's Argo CD; a has no Application left
    for (const gd of [one, two]) {
      await f.expect.application(gd, () => true, argoCdNamespaceOf(b));
      await f.expect.deployment(gd).is('Synced/Healthy on b', syncedOn(b));
      await eventually(
        `no Application of ${gd.metadata.name} on a`,
        async () => ((await applicationIn(argoCdNamespaceOf(a), gd)) === undefined ? true : undefined),
        CONVERGE_MS,
      );
    }
    // and the ConfigMaps are the very objects deployed before (same uid), never deleted meanwhile
    for (const name of ['one', 'two'] as const) {
      const now = await f.expect.readObject(tenant, 'ConfigMap', name);
      assert.equal(now?.metadata.uid, before[name].metadata.uid, `ConfigMap ${name} was re-created`);
    }
    stopWatch();
    assert.deepEqual(deletes, []);
    // and the namespace says where the tenant went
    const moved = await eventually('the move Event', async () =>
      (await eventsOf(tenant)).find((e) => e.reason === TenantMoveEventReason.Moved),
    );
    assert.match(moved.message ?? '', new RegExp(`'${a}' to '${b}' with 2 applications`));

    // When the automated deployment changes after the move, b's Argo CD deploys it
    await repo.commit({ 'one/cm.yaml': manifest.configMap('one', { v: '2' }) });
    await f.expect.object(tenant, 'ConfigMap', 'one', (cm) => cm.data?.v === '2');
    // and a SyncRun of the manual one runs on b
    await repo.commit({ 'two/cm.yaml': manifest.configMap('two', { v: '2' }) });
    await f.system.createSyncRun(tenant, 'after-move', { gitopsDeploymentName: 'two' });
    await f.expect.object(tenant, 'ConfigMap', 'two', (cm) => cm.data?.v === '2');

    // When the deployment is deleted on b, b's Argo CD prunes what it took over
    await f.when.deleted(one);
    await f.expect.deployment(one).gone();
    await f.expect.noObject(tenant, 'ConfigMap', 'one');
  });

  it('a label naming an unknown instance moves nothing and says so on the namespace', async () => {
    const { tenant, gd } = await deployedOnA('unknown', 'stay');

    await mergePatch(f.system.kc, paths.namespace(tenant), {
      metadata: { labels: { [Label.EngineInstance]: 'no-such-instance' } },
    });

    const refused = await eventually('the refusal Event', async () =>
      (await eventsOf(tenant)).find((e) => e.reason === TenantMoveEventReason.MoveRefused),
    );
    assert.match(refused.message ?? '', /'no-such-instance', which is not registered: the tenant stays on/);
    const status = (await f.expect.deployment(gd).read())?.status ?? {};
    assert.equal(engineInstanceOf(status), a);
    assert.ok(await applicationIn(argoCdNamespaceOf(a), gd));
  });

  it("an instance's agent stopped: its tenants' deployments say so and wait, the other instance's are untouched; restarted, everything converges", async () => {
    const onB = await f.given.tenant('away-b', { [Label.EngineInstance]: b });
    const onA = await f.given.tenant('away-a', { [Label.EngineInstance]: a });
    const repo = await f.given.repository('away', { 'app/cm.yaml': manifest.configMap('waits', { k: 'v' }) });

    // When b's agent is stopped and a tenant of each instance deploys
    await f.system.kill('cluster-agent-b');
    const waiting = await f.when.deployed(onB, 'app', gitSource(repo, 'app'));
    const unaffected = await f.when.deployed(onA, 'app', gitSource(repo, 'app'));

    // Then the one on b says its instance is away, and the one on a converges
    const away = await f.expect
      .deployment(waiting)
      .is('ErrorOccurred naming b', (s) =>
        (s.conditions ?? []).some(
          (c) => c.type === 'ErrorOccurred' && c.status === 'True' && (c.message ?? '').includes(`'${b}'`),
        ),
      );
    assert.match(
      (away.conditions ?? []).find((c) => c.type === 'ErrorOccurred')?.message ?? '',
      /has taken this change for .* it waits, and is applied when an agent of the instance is back/,
    );
    await f.expect.deployment(unaffected).is('Synced/Healthy on a', syncedAndHealthy);
    assert.equal(await applicationIn(argoCdNamespaceOf(b), waiting), undefined);

    // When b's agent starts again, the waiting change is applied and the condition resolves
    await f.system.start('cluster-agent-b');
    await f.expect
      .deployment(waiting)
      .is(
        'Synced/Healthy, no error',
        (s) =>
          syncedAndHealthy(s) &&
          !(s.conditions ?? []).some((c) => c.type === 'ErrorOccurred' && c.status === 'True'),
      );
    await f.expect.object(onB, 'ConfigMap', 'waits');
  });

  it("a move while the old instance's agent is stopped waits for it: the new instance takes nothing over before the old one released it", async () => {
    const { tenant, gd } = await deployedOnA('held', 'held');
    const before = await f.expect.object(tenant, 'ConfigMap', 'held');

    // When a's agent is down and the tenant is moved to b
    await f.system.kill('cluster-agent');
    const from = f.system.logs.length;
    await mergePatch(f.system.kc, paths.namespace(tenant), {
      metadata: { labels: { [Label.EngineInstance]: b } },
    });
    await f.expect.deployment(gd).is('placed on b', (s) => engineInstanceOf(s) === b);

    // Then b's agent has taken the move of the Application and decided to wait for a's release (its own line
    // about it), and b has no Application while a's is still there
    const application = `gitopsdepl-${gd.metadata.uid}`;
    await f.system.logged(
      'cluster-agent-b',
      new RegExp(
        `^(?=.*resource pending)(?=.*waiting for engine instance \\S+ to release Application ${application})`,
      ),
      { from, timeoutMs: CONVERGE_MS },
    );
    assert.ok(await applicationIn(argoCdNamespaceOf(a), gd), "a's Application is still there");
    assert.equal(await applicationIn(argoCdNamespaceOf(b), gd), undefined);

    // When a's agent starts again, it releases the Application and b takes the resources over
    await f.system.start('cluster-agent');
    await f.expect.application(gd, () => true, argoCdNamespaceOf(b));
    await f.expect.deployment(gd).is('Synced/Healthy on b', syncedOn(b));
    assert.equal(await applicationIn(argoCdNamespaceOf(a), gd), undefined);
    assert.equal((await f.expect.readObject(tenant, 'ConfigMap', 'held'))?.metadata.uid, before.metadata.uid);
  });

  it('two agent replicas of an instance: SIGKILL of the active one, and the standby carries on', async () => {
    const tenant = await f.given.tenant('failover', { [Label.EngineInstance]: a });
    const repo = await f.given.repository('failover', {
      'first/cm.yaml': manifest.configMap('first', { k: 'v' }),
      'second/cm.yaml': manifest.configMap('second', { k: 'v' }),
    });
    await f.system.start('cluster-agent-2');
    const first = await f.when.deployed(tenant, 'first', gitSource(repo, 'first'));
    await f.expect.deployment(first).is('Synced/Healthy', syncedAndHealthy);

    // When the active agent dies (whichever of the two it is) and the user deploys again
    await f.system.kill('cluster-agent');
    const second = await f.when.deployed(tenant, 'second', gitSource(repo, 'second'));

    // Then the other replica takes it: deployed through a's Argo CD
    await f.expect.deployment(second).is('Synced/Healthy on a', syncedOn(a));
    await f.expect.object(tenant, 'ConfigMap', 'second');
    await f.expect.application(second, () => true, argoCdNamespaceOf(a));
    assert.deepEqual(f.system.crashes, []);
  });

  it('draining an instance moves all its tenants to the other one, their resources in place; Drained at the end', async () => {
    const { tenant, gd } = await deployedOnA('drained', 'kept');
    const before = await f.expect.object(tenant, 'ConfigMap', 'kept');
    const instancePath = `/apis/managed-gitops.redhat.com/v1alpha1/gitopsengineinstances/${a}`;
    await eventually('the GitOpsEngineInstance of a', () => get(f.system.kc, instancePath), CONVERGE_MS);

    // When the operator drains a
    await mergePatch(f.system.kc, instancePath, { spec: { drain: true } });

    // Then every deployment of the test ends up on b, Synced and Healthy, and a has no Application left
    await f.expect.deployment(gd).is('Synced/Healthy on b', syncedOn(b));
    assert.equal((await f.expect.readObject(tenant, 'ConfigMap', 'kept'))?.metadata.uid, before.metadata.uid);
    type Instance = KubeObject & {
      spec?: { cordoned?: boolean };
      status?: { tenants?: number; conditions?: { type: string; status: string }[] };
    };
    const drained = await eventually(
      'a Drained',
      async () => {
        const object = await get<Instance>(f.system.kc, instancePath);
        const condition = object?.status?.conditions?.find((c) => c.type === 'Drained');
        return condition?.status === 'True' ? object : undefined;
      },
      CONVERGE_MS,
    );
    assert.equal(drained.spec?.cordoned, true);
    assert.equal(drained.status?.tenants, 0);
    const left = (await kubeRequest(f.system.kc, {
      method: HttpMethod.GET,
      path: `/apis/argoproj.io/v1alpha1/namespaces/${f.system.argoCdNamespace}/applications`,
    })) as { items: KubeObject[] };
    assert.deepEqual(
      left.items.map((app) => app.metadata.name),
      [],
    );
  });

  /** Watches the ConfigMaps of a namespace; returns the stop function. */
  async function watchConfigMaps(namespace: string, onEvent: (type: string, name: string) => void) {
    const watch = await watchEvents(f.system.kc, `/api/v1/namespaces/${namespace}/configmaps`, (type, cm) =>
      onEvent(type, cm.metadata.name),
    );
    return () => watch.stop();
  }
});
