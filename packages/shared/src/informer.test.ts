import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { backoffDelay, stripManagedFields } from './informer.ts';

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

  it('backs off exponentially with bounded jitter and a cap', () => {
    const low = () => 0;
    const high = () => 0.999_999;
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 7].map((attempt) => backoffDelay(attempt, 800, 30_000, low)),
      [640, 1280, 2560, 5120, 10240, 20480, 24000],
    );
    assert.equal(backoffDelay(50, 800, 30_000, high), 36_000);
    assert.equal(
      backoffDelay(1, 800, 30_000, () => 0.5),
      800,
    );
  });
});
