import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { stripManagedFields } from './informer.ts';

describe('informer helpers', () => {
  it('strips managedFields without touching the original object', () => {
    const live = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'cm',
        namespace: 'ns',
        resourceVersion: '12',
        managedFields: [{ manager: 'kubectl' }],
      },
      data: { a: '1' },
    };
    const cached = stripManagedFields(live);
    assert.deepEqual(cached, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'cm', namespace: 'ns', resourceVersion: '12' },
      data: { a: '1' },
    });
    assert.equal(live.metadata.managedFields.length, 1);
  });

  it("strips kubectl's last-applied annotation and keeps the other annotations", () => {
    const live = {
      metadata: {
        name: 'cm',
        annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"big":"copy"}', team: 'a' },
      },
    };
    assert.deepEqual(stripManagedFields(live), { metadata: { name: 'cm', annotations: { team: 'a' } } });
    assert.equal(Object.keys(live.metadata.annotations).length, 2);
  });
});
