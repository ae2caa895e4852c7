/**
 * Tier 3a: a fleet of six engine instances, each with its own agent process and a played Argo CD whose syncs
 * succeed at once, behind one backend: the fleet benchmark's invariants (e2e/bench/fleet.bench.ts) at 300
 * deployments. Placement spreads tenants by load; a drain moves every tenant of an instance elsewhere with
 * nothing pruned; a new instance moves nobody and takes the next new tenant.
 */
import assert from 'node:assert/strict';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type Fleet, type FleetInstance, startFleet, syncedHealthyOn } from '../fixture/fleet.ts';
import { type GitOpsDeployment, list, paths } from '../fixture/kube.ts';

const INSTANCES = 6;
const TENANTS = 30;
const PER_TENANT = 10;
const CONVERGE_MS = 180_000;

describe('tier 3a: a fleet of six instances, Argo CD played', () => {
  let fleet: Fleet;
  let tenants: string[];

  /** Every deployment of the fleet's tenants, as the user reads them now. */
  const deployments = async (namespaces = tenants) =>
    (
      await Promise.all(
        namespaces.map((ns) => list<GitOpsDeployment>(fleet.system.kc, paths.gitopsDeployments(ns))),
      )
    ).flat();
  const instanceOf = (gd: GitOpsDeployment) =>
    (gd.status as { engineInstance?: string } | undefined)?.engineInstance;
  /** Until every deployment of `namespaces` is Synced and Healthy; returns them. */
  const allSynced = (what: string, namespaces = tenants, count = namespaces.length * PER_TENANT) =>
    eventually(
      what,
      async () => {
        const all = await deployments(namespaces);
        return all.length === count && all.every((gd) => syncedHealthyOn(gd)) ? all : undefined;
      },
      CONVERGE_MS,
    );

  beforeAll(async () => {
    // The instances' status (and so Drained) every 2 s instead of 15.
    fleet = await startFleet({
      instances: INSTANCES,
      backendEnv: { GITOPS_ENGINE_INSTANCE_STATUS_INTERVAL: '2s' },
    });
    tenants = await fleet.tenants(TENANTS);
    const work = tenants.flatMap((ns) => Array.from({ length: PER_TENANT }, (_, i) => ({ ns, i })));
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (let item = work.shift(); item; item = work.shift()) {
          await fleet.system.createGitOpsDeployment(item.ns, `app-${item.i}`, {
            source: { repoURL: 'https://github.com/fleet/apps', path: `${item.ns}/${item.i}` },
            type: 'automated',
          });
        }
      }),
    );
  });
  afterAll(async () => {
    await fleet?.stop();
  });

  it('spreads 300 deployments over six instances by load; each tenant on one instance, Synced and Healthy there', async () => {
    const all = await allSynced('300 deployments Synced and Healthy');
    const spread = fleet.spread();
    assert.equal(
      [...spread.values()].reduce((a, b) => a + b, 0),
      TENANTS * PER_TENANT,
      JSON.stringify([...spread]),
    );
    // Tenants are the unit of placement (10 applications each): 5 per instance when even; no instance empty,
    // none with more than twice another's.
    const counts = [...spread.values()];
    assert.ok(Math.min(...counts) > 0, `an instance took nothing: ${JSON.stringify([...spread])}`);
    assert.ok(Math.max(...counts) <= 2 * Math.min(...counts), `uneven: ${JSON.stringify([...spread])}`);
    for (const ns of tenants) {
      const own = all.filter((gd) => gd.metadata.namespace === ns);
      assert.equal(new Set(own.map(instanceOf)).size, 1, `${ns} is split over instances`);
    }
    // Each Argo CD holds exactly the applications of the deployments placed on it.
    for (const instance of fleet.instances) {
      assert.equal(spread.get(instance.name), all.filter((gd) => instanceOf(gd) === instance.name).length);
    }
    assert.equal(fleet.pruned(), 0);
    assert.deepEqual(fleet.system.crashes, []);
  });

  it('drains the fullest instance: its tenants Synced and Healthy elsewhere, nothing pruned, Drained', async () => {
    const spread = fleet.spread();
    const fullest = fleet.instances.reduce((a, b) =>
      (spread.get(a.name) ?? 0) >= (spread.get(b.name) ?? 0) ? a : b,
    );
    const before = await deployments();
    const moving = new Set(
      before.filter((gd) => instanceOf(gd) === fullest.name).map((gd) => gd.metadata.namespace),
    );
    assert.ok(moving.size > 0);

    await fleet.drain(fullest, CONVERGE_MS);

    const after = await allSynced('every deployment Synced and Healthy after the drain');
    assert.equal(fullest.argoCd.applications(), 0, 'the drained Argo CD still holds Applications');
    for (const gd of after) {
      assert.notEqual(
        instanceOf(gd),
        fullest.name,
        `${gd.metadata.namespace}/${gd.metadata.name} left behind`,
      );
      // Tenants that were elsewhere stayed where they were.
      if (!moving.has(gd.metadata.namespace as string)) {
        const was = before.find((b) => b.metadata.uid === gd.metadata.uid);
        assert.equal(instanceOf(gd), was && instanceOf(was));
      }
    }
    // The moved tenants went to more than one instance (each to the least loaded at its turn), and nothing was
    // pruned: every Application left the drained Argo CD without cascading.
    const targets = new Set(
      after.filter((gd) => moving.has(gd.metadata.namespace as string)).map(instanceOf),
    );
    assert.ok(targets.size > 1 || moving.size === 1, `all moved to ${[...targets]}`);
    assert.equal(fleet.pruned(), 0);
    const object = await fleet.engineInstance(fullest.name);
    assert.equal(object?.spec?.cordoned, true);
    assert.equal(object?.status?.tenants, 0);
    assert.deepEqual(fleet.system.crashes, []);
  });

  it('adds an instance: no tenant moves, and the next new tenant goes to it', async () => {
    const before = new Map((await deployments()).map((gd) => [gd.metadata.uid, instanceOf(gd)]));
    const added: FleetInstance = await fleet.addInstance();
    await eventually(
      `${added.name} Available`,
      async () =>
        (await fleet.engineInstance(added.name))?.status?.conditions?.some(
          (c) => c.type === 'Available' && c.status === 'True',
        ),
      CONVERGE_MS,
    );

    const [newcomer] = await fleet.tenants(1);
    assert.ok(newcomer);
    for (let i = 0; i < PER_TENANT; i++) {
      await fleet.system.createGitOpsDeployment(newcomer, `app-${i}`, {
        source: { repoURL: 'https://github.com/fleet/apps', path: `${newcomer}/${i}` },
        type: 'automated',
      });
    }
    const placed = await allSynced('the new tenant Synced and Healthy', [newcomer]);
    assert.deepEqual(new Set(placed.map(instanceOf)), new Set([added.name]));
    assert.equal(added.argoCd.applications(), PER_TENANT);
    // Nobody else moved.
    const after = await deployments();
    assert.equal(after.length, before.size);
    for (const gd of after) assert.equal(instanceOf(gd), before.get(gd.metadata.uid));
    assert.equal(fleet.pruned(), 0);
    assert.deepEqual(fleet.system.crashes, []);
  });
});
