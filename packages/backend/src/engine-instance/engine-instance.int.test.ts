/**
 * Operators steer engine instances through the Kubernetes API: every registered instance has a
 * GitOpsEngineInstance showing its Argo CD namespace, cluster, load and agents; spec.cordoned cordons it;
 * deleting it retires the instance once no tenant is left; an object for an unknown instance says so. (The
 * backend fixture runs no agent: the test plays the agents' registration and their listening sessions.)
 */
import assert from 'node:assert/strict';
import {
  API_GROUP_VERSION,
  type Condition,
  ENGINE_INSTANCE_FINALIZER,
  EngineInstanceConditionType,
  EngineInstanceEventReason,
  EngineInstanceMessage,
  EngineInstanceReason,
  type GitOpsEngineInstanceStatus,
  Kind,
  Label,
  PlacementMessage,
  Plural,
} from '@gitops/api';
import {
  completeApplicationRelease,
  type EngineInstanceRow,
  getApplication,
  getEngineInstanceByName,
  listEngineInstanceOverviews,
  setEngineInstanceCordoned,
  upsertEngineInstance,
} from '@gitops/db';
import { givenListeningAgentSession } from '@gitops/db/testing';
import { clusterIdentity, getPathIfExists, HttpMethod, type KubeObject, kubeRequest } from '@gitops/shared';
import { eventually, listEvents, randomSuffix } from '@gitops/shared/testing';
import { beforeAll, describe, test } from 'vitest';
import type { Backend } from '../app.ts';
import { BACKEND_SHARD_LABEL } from '../config.ts';
import { automatedTestDataSpec, useBackendFixture } from '../testing/backend-fixture.ts';

const spec = automatedTestDataSpec;

const collection = `/apis/${API_GROUP_VERSION}/${Plural.GitOpsEngineInstance}`;
const pathOf = (name: string) => `${collection}/${encodeURIComponent(name)}`;

type EngineInstanceObject = KubeObject & {
  spec?: { cordoned?: boolean; drain?: boolean };
  status?: GitOpsEngineInstanceStatus;
};

describe('GitOpsEngineInstance', () => {
  const f = useBackendFixture();
  let backend: Backend;

  beforeAll(async () => {
    // Looks at the instances every second (default 15 s); the tenant sweep runs every 2 s, so a tenant whose
    // namespace is deleted leaves its instance quickly.
    backend = await f.startBackend({ GITOPS_ENGINE_INSTANCE_STATUS_INTERVAL: '1s', RESYNC_INTERVAL: '2s' });
  });

  const get = async (name: string) =>
    (await getPathIfExists(f.kc, pathOf(name))) as EngineInstanceObject | undefined;
  const mergePatch = (name: string, patch: unknown) =>
    kubeRequest(f.kc, {
      method: HttpMethod.PATCH,
      path: pathOf(name),
      body: patch,
      contentType: 'application/merge-patch+json',
    });
  const conditionOf = (object: EngineInstanceObject | undefined, type: string): Condition | undefined =>
    object?.status?.conditions?.find((c) => c.type === type);
  /** Waits until the object exists and `check` holds for it. */
  const objectWhere = (what: string, name: string, check: (object: EngineInstanceObject) => boolean) =>
    eventually(`${name}: ${what}`, async () => {
      const object = await get(name);
      return object && check(object) ? object : undefined;
    });
  /**
   * Waits until the object of `name` reports condition `type` (and `check` holds for it): that object, and
   * the condition's status, reason and message.
   */
  const conditionReported = async (
    name: string,
    type: string,
    what = `${type} reported`,
    check: (condition: Condition) => boolean = () => true,
  ) => {
    const object = await objectWhere(what, name, (o) => {
      const condition = conditionOf(o, type);
      return condition !== undefined && check(condition);
    });
    const condition = conditionOf(object, type);
    return {
      object,
      shown: { status: condition?.status, reason: condition?.reason, message: condition?.message },
    };
  };
  /** Registers an instance as its agent does at start (a namespace of this cluster as its Argo CD). */
  const registerInstance = async (name: string): Promise<EngineInstanceRow> => {
    const namespace = await f.createNamespace('argocd-gei');
    return await upsertEngineInstance(f.db, {
      name,
      namespaceName: namespace.name,
      namespaceUid: namespace.uid,
      clusterIdentity: await clusterIdentity(f.kc),
    });
  };
  const deploy = async (namespace: string, name: string) => {
    const cr = await f.createDeployment(namespace, name, spec);
    return await f.applicationOf(cr);
  };

  test('every registered instance gets one, showing its Argo CD namespace, cluster, tenants and applications', async () => {
    const own = backend.engineInstance();
    const ownObject = await objectWhere(
      'registered',
      own.name,
      (o) => o.status?.argoCDNamespace !== undefined,
    );
    assert.equal(ownObject.status?.argoCDNamespace, f.argoCdNamespace);
    assert.equal(ownObject.status?.cluster, await clusterIdentity(f.kc));
    assert.equal(ownObject.metadata.namespace, undefined, 'cluster-scoped');
    assert.deepEqual(ownObject.spec, { cordoned: false, drain: false });
    assert.ok(ownObject.metadata.finalizers?.includes(ENGINE_INSTANCE_FINALIZER));
    assert.equal(conditionOf(ownObject, EngineInstanceConditionType.Registered)?.status, 'True');

    const name = `gei-load-${randomSuffix()}`;
    const instance = await registerInstance(name);
    const tenant = await f.createNamespace('gei-load', { [Label.EngineInstance]: name });
    for (const deployment of ['a', 'b'])
      assert.equal((await deploy(tenant.name, deployment)).engine_instance_id, instance.id);
    const object = await objectWhere(
      'one tenant, two applications',
      name,
      (o) => o.status?.applications === 2,
    );
    assert.equal(object.status?.tenants, 1);
    assert.equal(object.status?.argoCDNamespace, instance.namespace_name);
    assert.equal(object.status?.cordoned, false);
    assert.equal(object.status?.observedGeneration, object.metadata.generation);
  });

  test('Available is False (AgentAway, naming the instance) while no agent listens, True while one does', async () => {
    const name = `gei-agent-${randomSuffix()}`;
    const instance = await registerInstance(name);
    const reported = await conditionReported(name, EngineInstanceConditionType.Available);
    assert.deepEqual(reported.shown, {
      status: 'False',
      reason: EngineInstanceReason.AgentAway,
      message: EngineInstanceMessage.agentAway(name),
    });
    assert.equal(reported.object.status?.agents, 0);

    const agent = await givenListeningAgentSession(f.database.url, instance.id);
    try {
      const { object, shown } = await conditionReported(
        name,
        EngineInstanceConditionType.Available,
        'Available True',
        (c) => c.status === 'True',
      );
      assert.equal(shown.reason, EngineInstanceReason.AgentListening);
      assert.equal(object.status?.agents, 1);
    } finally {
      await agent.end();
    }
    const away = await conditionReported(
      name,
      EngineInstanceConditionType.Available,
      'Available False again',
      (c) => c.status === 'False',
    );
    assert.equal(away.shown.reason, EngineInstanceReason.AgentAway);
    assert.equal(away.object.status?.agents, 0);
  });

  test('spec.cordoned cordons the instance in the database, so a label naming it is refused; a cordon set in the database shows in spec', async () => {
    const name = `gei-cordon-${randomSuffix()}`;
    await registerInstance(name);
    await objectWhere('created', name, (o) => o.status?.observedGeneration !== undefined);
    await mergePatch(name, { spec: { cordoned: true } });
    await eventually('the row is cordoned', async () =>
      (await getEngineInstanceByName(f.db, name))?.cordoned ? true : undefined,
    );
    await objectWhere('status.cordoned', name, (o) => o.status?.cordoned === true);

    const refused = await f.createNamespace('gei-refused', { [Label.EngineInstance]: name });
    await f.createDeployment(refused.name, 'a', spec);
    const condition = await eventually('ErrorOccurred', async () => {
      const live = await f.getDeployment(refused.name, 'a');
      const c = live && (live.status?.conditions ?? []).find((x) => x.type === 'ErrorOccurred');
      return c?.status === 'True' ? c : undefined;
    });
    assert.equal(condition.message, PlacementMessage.instanceCordoned(name));

    await mergePatch(name, { spec: { cordoned: false } });
    await eventually('the row is uncordoned', async () =>
      (await getEngineInstanceByName(f.db, name))?.cordoned === false ? true : undefined,
    );
    // ... and the object says that generation is applied (its status is written after the row).
    await objectWhere(
      'uncordon applied',
      name,
      (o) => o.status?.observedGeneration === o.metadata.generation && o.status?.cordoned === false,
    );
    // Cordoned in the database by other means (SQL): the object follows rather than undoing it.
    await setEngineInstanceCordoned(f.db, name, true);
    // The spec is written first, then the status: wait for both.
    const object = await objectWhere(
      'spec and status follow the database',
      name,
      (o) => o.spec?.cordoned === true && o.status?.cordoned === true,
    );
    assert.equal(object.status?.observedGeneration, object.metadata.generation);
    assert.equal((await getEngineInstanceByName(f.db, name))?.cordoned, true);
  });

  test('deleting it waits while tenants are placed (DeletionBlocked, a Warning Event, cordoned); with none left the row and the object go; registering again brings both back', async () => {
    const name = `gei-retire-${randomSuffix()}`;
    await registerInstance(name);
    const tenant = await f.createNamespace('gei-retire', { [Label.EngineInstance]: name });
    await deploy(tenant.name, 'a');
    const before = await objectWhere('one tenant', name, (o) => o.status?.tenants === 1);

    await kubeRequest(f.kc, { method: HttpMethod.DELETE, path: pathOf(name) });
    const { object: blocked, shown } = await conditionReported(
      name,
      EngineInstanceConditionType.DeletionBlocked,
    );
    assert.deepEqual(shown, {
      status: 'True',
      reason: EngineInstanceReason.TenantsPlaced,
      message: EngineInstanceMessage.deletionBlocked(name, 1, 1),
    });
    assert.equal(blocked.status?.cordoned, true, 'a retiring instance takes no new tenants');
    assert.ok(await getEngineInstanceByName(f.db, name), 'the row stays');
    const events = await eventually('the DeletionBlocked Event', async () => {
      const events = await listEvents(f.kc, 'default', { uid: before.metadata.uid! });
      const found = events.filter((e) => e.reason === EngineInstanceEventReason.DeletionBlocked);
      return found.length > 0 ? found : undefined;
    });
    assert.equal(events[0]?.type, 'Warning');
    assert.equal(events[0]?.message, EngineInstanceMessage.deletionBlocked(name, 1, 1));

    // The tenant goes (its namespace is deleted, so the tenant sweep removes it): nothing is left on the instance.
    await kubeRequest(f.kc, { method: HttpMethod.DELETE, path: `/api/v1/namespaces/${tenant.name}` });
    await eventually('the object is gone', async () => ((await get(name)) ? undefined : true), 120_000);
    assert.equal(await getEngineInstanceByName(f.db, name), undefined, 'the row is deleted');

    // Its agent starts again and registers the instance: a new row and a new object.
    const again = await registerInstance(name);
    const back = await objectWhere('back', name, (o) => o.status?.argoCDNamespace === again.namespace_name);
    assert.notEqual(back.metadata.uid, before.metadata.uid);
    assert.equal(conditionOf(back, EngineInstanceConditionType.Registered)?.status, 'True');
    assert.equal(back.spec?.cordoned, false);
  });

  test('spec.drain cordons the instance and moves every tenant to the least loaded other one; Drained once their Applications are released', async () => {
    const name = `gei-drain-${randomSuffix()}`;
    const drained = await registerInstance(name);
    const target = await registerInstance(`gei-drain-to-${randomSuffix()}`);
    // Only the target takes tenants (every other instance of this file's database is cordoned meanwhile).
    const others = (await listEngineInstanceOverviews(f.db)).filter(
      (i) => i.id !== drained.id && i.id !== target.id && !i.cordoned,
    );
    for (const other of others) await setEngineInstanceCordoned(f.db, other.name, true);
    try {
      const tenants = await Promise.all(
        [0, 1].map(() => f.createNamespace('gei-drain', { [Label.EngineInstance]: name })),
      );
      const applications = await Promise.all(tenants.map((t) => deploy(t.name, 'a')));
      await objectWhere('two tenants', name, (o) => o.status?.tenants === 2);

      await mergePatch(name, { spec: { drain: true } });

      const draining = await objectWhere(
        'tenants moved, Applications waiting for their release',
        name,
        (o) =>
          o.status?.tenants === 0 &&
          conditionOf(o, EngineInstanceConditionType.Drained)?.reason === EngineInstanceReason.Draining,
      );
      assert.equal(draining.spec?.cordoned, true, 'a drain cordons');
      assert.equal(draining.status?.cordoned, true);
      assert.equal(
        conditionOf(draining, EngineInstanceConditionType.Drained)?.message,
        EngineInstanceMessage.draining(name, 0, 2),
      );
      for (const application of applications) {
        const row = await getApplication(f.db, application.id);
        assert.deepEqual(
          [row?.engine_instance_id, row?.releasing_engine_instance_id],
          [target.id, drained.id],
        );
      }
      const moved = await eventually('the TenantsMoved Event', async () => {
        const events = await listEvents(f.kc, 'default', { uid: draining.metadata.uid! });
        const found = events.filter((e) => e.reason === EngineInstanceEventReason.TenantsMoved);
        return found.length > 0 ? found : undefined;
      });
      for (const tenant of tenants)
        assert.match(moved.map((e) => e.message).join(' '), new RegExp(`${tenant.name} → ${target.name}`));

      // The drained instance's agent releases its Applications (played here: the fixture runs no agent).
      for (const application of applications)
        await completeApplicationRelease(f.db, application.id, drained.id);
      const done = await conditionReported(
        name,
        EngineInstanceConditionType.Drained,
        'Drained',
        (c) => c.status === 'True',
      );
      assert.equal(done.shown.message, EngineInstanceMessage.drained(name));
    } finally {
      for (const other of others) await setEngineInstanceCordoned(f.db, other.name, false);
    }
  });

  test('a drain with no other instance to take its tenants says so and moves nothing', async () => {
    const name = `gei-stuck-${randomSuffix()}`;
    await registerInstance(name);
    const tenant = await f.createNamespace('gei-stuck', { [Label.EngineInstance]: name });
    await deploy(tenant.name, 'a');
    await objectWhere('one tenant', name, (o) => o.status?.tenants === 1);
    const others = (await listEngineInstanceOverviews(f.db)).filter((i) => i.name !== name && !i.cordoned);
    for (const other of others) await setEngineInstanceCordoned(f.db, other.name, true);
    try {
      await mergePatch(name, { spec: { drain: true } });
      const stuck = await conditionReported(
        name,
        EngineInstanceConditionType.Drained,
        'NoDrainTarget',
        (c) => c.reason === EngineInstanceReason.NoDrainTarget,
      );
      assert.equal(stuck.shown.message, EngineInstanceMessage.noDrainTarget(name, 1));
      assert.equal(stuck.object.status?.tenants, 1);
    } finally {
      for (const other of others) await setEngineInstanceCordoned(f.db, other.name, false);
    }
  });

  test('a object made by hand for an unknown instance says no agent registered it and stays; once one does, it is that instance', async () => {
    const name = `gei-hand-${randomSuffix()}`;
    await kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: collection,
      body: {
        apiVersion: API_GROUP_VERSION,
        kind: Kind.GitOpsEngineInstance,
        metadata: { name, labels: { [BACKEND_SHARD_LABEL]: f.runLabel } },
        spec: { cordoned: true },
      },
    });
    const { object, shown } = await conditionReported(name, EngineInstanceConditionType.Registered);
    assert.deepEqual(shown, {
      status: 'False',
      reason: EngineInstanceReason.NotRegistered,
      message: EngineInstanceMessage.notRegistered(name),
    });
    assert.equal(
      conditionOf(object, EngineInstanceConditionType.Available)?.reason,
      EngineInstanceReason.NotRegistered,
    );
    assert.equal(object.metadata.deletionTimestamp, undefined, 'not deleted by the backend');
    assert.deepEqual(object.metadata.finalizers ?? [], []);

    // An agent registers it: the object is now that instance's, and its cordon (set before) is applied.
    const instance = await registerInstance(name);
    const adopted = await objectWhere(
      'Registered',
      name,
      (o) => conditionOf(o, EngineInstanceConditionType.Registered)?.status === 'True',
    );
    assert.equal(adopted.metadata.uid, object.metadata.uid);
    assert.equal(adopted.status?.argoCDNamespace, instance.namespace_name);
    assert.ok(adopted.metadata.finalizers?.includes(ENGINE_INSTANCE_FINALIZER));
    await eventually('the row is cordoned', async () =>
      (await getEngineInstanceByName(f.db, name))?.cordoned ? true : undefined,
    );
  });

  test('an instance whose name cannot be an object name gets none, and the others are kept current', async () => {
    await registerInstance(`Not_A_Name-${randomSuffix()}`);
    const name = `gei-after-${randomSuffix()}`;
    await registerInstance(name);
    await objectWhere('created', name, (o) => o.status?.argoCDNamespace !== undefined);
    const list = (await kubeRequest(f.kc, {
      method: HttpMethod.GET,
      path: collection,
      query: { labelSelector: `${BACKEND_SHARD_LABEL}=${f.runLabel}` },
    })) as { items: KubeObject[] };
    assert.ok(list.items.every((o) => !o.metadata.name.toLowerCase().startsWith('not')));
    assert.equal(backend.ready(), true);
  });
});
