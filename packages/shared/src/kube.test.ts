import assert from 'node:assert/strict';
import { test } from 'vitest';
import { type KubeObject, kindParser } from './kube.ts';

test('kindParser gives a listed item its kind’s apiVersion and kind and keeps the rest', () => {
  // A list's items carry no apiVersion or kind
  const parse = kindParser<KubeObject & { spec?: { kafkaId?: string } }>({
    apiVersion: 'rhoas.redhat.com/v1alpha1',
    kind: 'KafkaConnection',
  });
  const parsed = parse({ metadata: { name: 'k', namespace: 'n' }, spec: { kafkaId: 'abc' } });
  assert.equal(parsed.apiVersion, 'rhoas.redhat.com/v1alpha1');
  assert.equal(parsed.kind, 'KafkaConnection');
  assert.equal(parsed.spec?.kafkaId, 'abc');
  assert.equal(parsed.metadata.name, 'k');
});

test('kindParser refuses what is not an object of a kind (the informer leaves it out of its cache)', () => {
  const parse = kindParser({ apiVersion: 'appstudio.redhat.com/v1alpha1', kind: 'Environment' });
  assert.throws(() => parse({ metadata: {} }), /metadata.name/);
  assert.throws(() => parse({ metadata: { name: 'e' }, spec: 'prod' }), /spec is not an object/);
  assert.throws(() => parse({ metadata: { name: 'e' }, status: [1] }), /status is not an object/);
});
