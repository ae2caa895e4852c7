import assert from 'node:assert/strict';
import {
  ENGINE_INSTANCE_FINALIZER,
  EngineInstanceConditionType,
  EngineInstanceMessage,
  EngineInstanceReason,
} from '@gitops/api';
import type { EngineInstanceOverview } from '@gitops/db';
import { describe, test } from 'vitest';
import {
  desiredStatus,
  isObjectName,
  needsReconcile,
  parseEngineInstance,
} from './engine-instance.status.ts';

const now = new Date('2026-03-01T10:00:00Z');
const later = new Date('2026-03-01T11:00:00Z');

const overview = (fields: Partial<EngineInstanceOverview> = {}): EngineInstanceOverview => ({
  id: 'id-1',
  name: 'east',
  namespace_name: 'argocd-east',
  namespace_uid: 'ns-uid',
  cluster_identity: 'cluster-uid',
  cordoned: false,
  db_role: null,
  sealing_key_id: null,
  key_rotation_requested_at: null,
  created_at: now,
  updated_at: now,
  tenants: 2,
  applications: 5,
  releasing: 0,
  deletionsHeld: 0,
  listening: true,
  agents: 2,
  ...fields,
});

const object = (
  fields: { status?: unknown; cordoned?: boolean; deleting?: boolean; finalizer?: boolean } = {},
) =>
  parseEngineInstance({
    metadata: {
      name: 'east',
      generation: 3,
      finalizers: fields.finalizer === false ? [] : [ENGINE_INSTANCE_FINALIZER],
      ...(fields.deleting ? { deletionTimestamp: '2026-03-01T09:00:00Z' } : {}),
    },
    spec: { cordoned: fields.cordoned ?? false },
    ...(fields.status === undefined ? {} : { status: fields.status }),
  });

describe('GitOpsEngineInstance status', () => {
  test('a registered instance: its namespace, cluster, load, agents, cordon and Registered/Available True', () => {
    const status = desiredStatus(object(), overview(), now);
    assert.deepEqual(status, {
      observedGeneration: 3,
      argoCDNamespace: 'argocd-east',
      cluster: 'cluster-uid',
      agents: 2,
      tenants: 2,
      applications: 5,
      cordoned: false,
      conditions: [
        {
          type: EngineInstanceConditionType.Registered,
          status: 'True',
          observedGeneration: 3,
          reason: EngineInstanceReason.Registered,
          message: EngineInstanceMessage.registered('east', 'argocd-east', 'cluster-uid'),
          lastTransitionTime: '2026-03-01T10:00:00Z',
        },
        {
          type: EngineInstanceConditionType.Available,
          status: 'True',
          observedGeneration: 3,
          reason: EngineInstanceReason.AgentListening,
          message: EngineInstanceMessage.agentListening('east'),
          lastTransitionTime: '2026-03-01T10:00:00Z',
        },
      ],
    });
    // The same verdict later is the same status: nothing to write.
    assert.deepEqual(desiredStatus(object({ status }), overview(), later), status);
    assert.equal(needsReconcile(object({ status }), overview(), later), false);
  });

  test('the look after a notification leaves a changed load alone, not a changed verdict', () => {
    const status = desiredStatus(object(), overview(), now);
    const busier = overview({ tenants: 7, applications: 70 });
    // The periodic look rewrites the counts...
    assert.equal(needsReconcile(object({ status }), busier, later), true);
    // ...the look after operations were created does not, as long as nothing else changed.
    assert.equal(needsReconcile(object({ status }), busier, later, { load: false }), false);
    assert.equal(
      needsReconcile(object({ status }), overview({ tenants: 7, listening: false, agents: 0 }), later, {
        load: false,
      }),
      true,
    );
    assert.equal(needsReconcile(object({ status, cordoned: true }), busier, later, { load: false }), true);
  });

  test('no agent listening: Available False, AgentAway, naming the instance', () => {
    const status = desiredStatus(object(), overview({ listening: false, agents: 0 }), now);
    const available = status.conditions?.find((c) => c.type === EngineInstanceConditionType.Available);
    assert.equal(available?.status, 'False');
    assert.equal(available?.reason, EngineInstanceReason.AgentAway);
    assert.equal(
      available?.message,
      "no agent of the engine instance 'east' listens now: its tenants' changes wait in the database until one is back",
    );
  });

  test('held deletes: DeletionsHeld True with how many and the command to confirm; none left: False, and a reconcile', () => {
    const status = desiredStatus(object(), overview({ deletionsHeld: 3 }), now);
    const held = status.conditions?.find((c) => c.type === EngineInstanceConditionType.DeletionsHeld);
    assert.equal(held?.status, 'True');
    assert.equal(held?.reason, EngineInstanceReason.DeletionGuardTripped);
    assert.match(held?.message ?? '', /holds the deletion of 3 Argo CD Applications/);
    assert.match(held?.message ?? '', /kubectl gitops instances confirm-deletions east/);
    // None held any more: the condition turns False (it was shown), which is a status to write.
    assert.equal(needsReconcile(object({ status }), overview(), later), true);
    const after = desiredStatus(object({ status }), overview(), later);
    const released = after.conditions?.find((c) => c.type === EngineInstanceConditionType.DeletionsHeld);
    assert.equal(released?.status, 'False');
    assert.equal(released?.reason, EngineInstanceReason.NoDeletionHeld);
    // Never held: no such condition at all.
    assert.equal(
      desiredStatus(object(), overview(), now).conditions?.some(
        (c) => c.type === EngineInstanceConditionType.DeletionsHeld,
      ),
      false,
    );
  });

  test('an unknown instance: Registered and Available False with NotRegistered, and no applied generation', () => {
    const status = desiredStatus(object(), undefined, now);
    assert.equal(status.observedGeneration, undefined);
    assert.deepEqual(
      status.conditions?.map((c) => [c.type, c.status, c.reason]),
      [
        [EngineInstanceConditionType.Registered, 'False', EngineInstanceReason.NotRegistered],
        [EngineInstanceConditionType.Available, 'False', EngineInstanceReason.NotRegistered],
      ],
    );
  });

  test('a deletion waiting for tenants says how many; one that can go on, or a cordon or finalizer to write, needs a reconcile', () => {
    const waiting = overview({ cordoned: true });
    const status = desiredStatus(object({ deleting: true }), waiting, now);
    const blocked = status.conditions?.find((c) => c.type === EngineInstanceConditionType.DeletionBlocked);
    assert.equal(blocked?.message, EngineInstanceMessage.deletionBlocked('east', 2, 5));
    assert.match(
      blocked?.message ?? '',
      /still holds 2 tenants \(5 applications\): they must be moved or drained/,
    );
    assert.equal(needsReconcile(object({ deleting: true, status }), waiting, later), false);
    assert.equal(
      needsReconcile(object({ deleting: true, status }), overview({ cordoned: false }), later),
      true,
    );
    assert.equal(
      needsReconcile(
        object({ deleting: true, status }),
        overview({ cordoned: true, tenants: 0, applications: 0 }),
        later,
      ),
      true,
    );
    assert.equal(
      needsReconcile(object({ deleting: true, status, finalizer: false }), undefined, later),
      false,
    );

    const settled = desiredStatus(object(), overview(), now);
    assert.equal(needsReconcile(object({ status: settled, finalizer: false }), overview(), later), true);
    assert.equal(needsReconcile(object({ status: settled, cordoned: true }), overview(), later), true);
  });

  test('object names: DNS-1123 subdomains only', () => {
    assert.ok(isObjectName('east'));
    assert.ok(isObjectName('argocd.east-1'));
    for (const bad of ['East', 'my_instance', '-east', 'a'.repeat(254), ''])
      assert.equal(isObjectName(bad), false, bad);
  });
});
