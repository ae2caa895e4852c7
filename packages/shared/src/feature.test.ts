import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { createFeatureSet, type Feature } from './feature.ts';
import type { Informer } from './informer.ts';
import type { KubeObject } from './kube.ts';
import { createSilentLogger } from './logger.ts';

/** Records what the set does to an informer; the set only starts, awaits and stops informers. */
function recordingInformer(name: string, journal: string[], synced = true): Informer<KubeObject> {
  return {
    start: () => journal.push(`start ${name}`),
    stop: async () => {
      journal.push(`stop ${name}`);
    },
    hasSynced: () => synced,
    waitForSync: async () => synced,
    list: () => [],
    get: () => undefined,
    addIndexers: () => undefined,
    byIndex: () => [],
    onAdd: () => () => undefined,
    onUpdate: () => () => undefined,
    onDelete: () => () => undefined,
    lastResourceVersion: () => '',
  };
}

function recordingFeature(name: string, informers: Informer<KubeObject>[], journal: string[]): Feature {
  return {
    name,
    informers,
    start: () => journal.push(`start ${name}`),
    resync: () => journal.push(`resync ${name}`),
    stop: async () => {
      journal.push(`stop ${name}`);
    },
  };
}

describe('createFeatureSet', () => {
  it('starts a shared informer once, starts features in order and stops them in reverse before the informers', async () => {
    const journal: string[] = [];
    const shared = recordingInformer('deployments', journal);
    const own = recordingInformer('syncruns', journal);
    const set = createFeatureSet(
      [recordingFeature('a', [shared], journal), recordingFeature('b', [shared, own], journal)],
      { logger: createSilentLogger() },
    );
    set.startInformers();
    assert.equal(await set.waitForSync(), true);
    set.start();
    set.resync();
    await set.stop();
    await set.stop();
    assert.deepEqual(journal, [
      'start deployments',
      'start syncruns',
      'start a',
      'start b',
      'resync a',
      'resync b',
      'stop b',
      'stop a',
      'stop deployments',
      'stop syncruns',
    ]);
  });

  it('reports not synced when one informer stopped before it synced, and a set that never started stops only its informers', async () => {
    const journal: string[] = [];
    const set = createFeatureSet(
      [
        recordingFeature(
          'a',
          [recordingInformer('x', journal), recordingInformer('y', journal, false)],
          journal,
        ),
      ],
      { logger: createSilentLogger() },
    );
    assert.equal(await set.waitForSync(), false);
    await set.stop();
    assert.deepEqual(journal, ['stop x', 'stop y']);
  });

  it('a feature that fails to stop does not keep the others running', async () => {
    const journal: string[] = [];
    const failing: Feature = {
      name: 'failing',
      informers: [],
      start: () => undefined,
      stop: async () => {
        throw new Error('boom');
      },
    };
    const set = createFeatureSet([recordingFeature('a', [], journal), failing], {
      logger: createSilentLogger(),
    });
    set.start();
    await set.stop();
    assert.deepEqual(journal, ['start a', 'stop a']);
  });
});
