import assert from 'node:assert/strict';
import { Provisioner as ProvisionerName, ReclaimPolicy } from '@gitops/api';
import { describe, it } from 'vitest';
import { deploymentTargetClass, object, target } from '../testing/unit.ts';
import { deprovisionWait, orphanIsDeleted, readyAccessOf } from './devsandbox.reconciler.ts';

const devsandbox = (name: string, reclaimPolicy: string) =>
  deploymentTargetClass(name, { provisioner: ProvisionerName.DevSandbox, reclaimPolicy });
const ready = (status: string, reason = '') => ({ type: 'Ready', status, reason });

describe('devsandbox step readyAccessOf: when a SpaceRequest becomes a target', () => {
  it('Ready with exactly one namespaceAccess entry: that entry', () => {
    const access = { name: 'env-ns', secretRef: 'env-secret' };
    const sr = object('sr', { status: { conditions: [ready('True')], namespaceAccess: [access] } });
    assert.deepEqual(readyAccessOf(sr), access);
  });

  it('not Ready, or no entry yet: nothing; more than one entry: unsupported', () => {
    const one = [{ name: 'a' }];
    assert.equal(
      readyAccessOf(object('sr', { status: { conditions: [ready('False')], namespaceAccess: one } })),
      undefined,
    );
    assert.equal(readyAccessOf(object('sr', { status: { conditions: [ready('True')] } })), undefined);
    const two = { status: { conditions: [ready('True')], namespaceAccess: [{ name: 'a' }, { name: 'b' }] } };
    assert.equal(readyAccessOf(object('sr', two)), 'unsupported');
  });
});

describe('devsandbox step orphanIsDeleted: a SpaceRequest whose claim is gone', () => {
  const annotated = object('sr', {}, { annotations: { 'appstudio.openshift.io/dtclass': 'sandbox' } });
  it('goes when the class it was made for says Delete, stays when Retain or when no devsandbox class exists', () => {
    assert.equal(orphanIsDeleted(annotated, [devsandbox('sandbox', ReclaimPolicy.Delete)]), true);
    assert.equal(orphanIsDeleted(annotated, [devsandbox('sandbox', ReclaimPolicy.Retain)]), false);
    assert.equal(orphanIsDeleted(annotated, [devsandbox('other', ReclaimPolicy.Delete)]), false);
    assert.equal(orphanIsDeleted(annotated, []), false);
  });

  it('without the class annotation: only when every devsandbox class says Delete', () => {
    const plain = object('sr');
    const classes = [
      devsandbox('a', ReclaimPolicy.Delete),
      deploymentTargetClass('x', { reclaimPolicy: 'Retain' }),
    ];
    assert.equal(orphanIsDeleted(plain, classes), true);
    assert.equal(orphanIsDeleted(plain, [...classes, devsandbox('b', ReclaimPolicy.Retain)]), false);
  });
});

describe('devsandbox step deprovisionWait: a deleted SpaceRequest still there', () => {
  const deletedAt = '2026-01-01T00:00:00Z';
  const at = (minutes: number) => new Date(Date.parse(deletedAt) + minutes * 60_000);
  const deleted = (reason: string) =>
    object('sr', { status: { conditions: [ready('False', reason)] } }, { deletionTimestamp: deletedAt });

  it('waits (30 s) until 2 minutes after the delete with UnableToTerminate, then Failed', () => {
    assert.deepEqual(deprovisionWait(deleted('UnableToTerminate'), target('t'), at(1)), {
      kind: 'waiting',
      requeueAfter: 30_000,
    });
    assert.deepEqual(deprovisionWait(deleted('UnableToTerminate'), target('t'), at(3)), {
      kind: 'failed',
      requeueAfter: 30_000,
    });
    assert.deepEqual(deprovisionWait(deleted('Terminating'), target('t'), at(3)), {
      kind: 'waiting',
      requeueAfter: 30_000,
    });
  });

  it('a target already Failed stays Failed', () => {
    const failed = target('t', {}, { phase: 'Failed' });
    assert.deepEqual(deprovisionWait(deleted('Terminating'), failed, at(0)), {
      kind: 'failed',
      requeueAfter: 30_000,
    });
  });
});
