import assert from 'node:assert/strict';
import { test } from 'vitest';
import { deliveryBackoffMs, operationCr } from './operation-relay.ts';

test('the Operation CR is operation-<id> with spec.operationID and the id as a label', () => {
  assert.deepEqual(operationCr('0b6f3c1e-0000-4000-8000-000000000001', 'argocd'), {
    apiVersion: 'managed-gitops.redhat.com/v1alpha1',
    kind: 'Operation',
    metadata: {
      name: 'operation-0b6f3c1e-0000-4000-8000-000000000001',
      namespace: 'argocd',
      labels: { 'managed-gitops.redhat.com/operation-id': '0b6f3c1e-0000-4000-8000-000000000001' },
    },
    spec: { operationID: '0b6f3c1e-0000-4000-8000-000000000001' },
  });
});

test('delivery backoff doubles from 1 s and is capped at 5 min', () => {
  const mid = () => 0.5;
  assert.equal(deliveryBackoffMs(0, mid), 1_000);
  assert.equal(deliveryBackoffMs(3, mid), 8_000);
  assert.equal(deliveryBackoffMs(30, mid), 300_000);
  assert.ok(deliveryBackoffMs(0, () => 0) >= 800 && deliveryBackoffMs(0, () => 1) <= 1_200);
});
