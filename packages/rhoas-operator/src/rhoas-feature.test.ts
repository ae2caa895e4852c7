import assert from 'node:assert/strict';
import { type KafkaConnection, RhoasKinds } from '@gitops/api';
import { test } from 'vitest';
import { parseRhoasCr } from './rhoas-feature.ts';

test('the informer’s parse hook gives a listed item its kind’s apiVersion and kind, and keeps the rest', () => {
  // A list's items carry no apiVersion or kind
  const item = { metadata: { name: 'k', namespace: 'n' }, spec: { kafkaId: 'abc' } };
  const parsed = parseRhoasCr<KafkaConnection>(RhoasKinds.KafkaConnection, item);
  assert.equal(parsed.apiVersion, 'rhoas.redhat.com/v1alpha1');
  assert.equal(parsed.kind, 'KafkaConnection');
  assert.equal(parsed.spec?.kafkaId, 'abc');
  assert.equal(parsed.metadata.name, 'k');
});

test('the parse hook refuses what is not an object of the kind (left out of the cache, never processed)', () => {
  assert.throws(() => parseRhoasCr(RhoasKinds.KafkaConnection, { metadata: {} }), /metadata.name/);
  assert.throws(
    () => parseRhoasCr(RhoasKinds.KafkaConnection, { metadata: { name: 'k' }, spec: 'kafka' }),
    /spec is not an object/,
  );
  assert.throws(
    () => parseRhoasCr(RhoasKinds.KafkaConnection, { metadata: { name: 'k' }, status: [1] }),
    /status is not an object/,
  );
});
