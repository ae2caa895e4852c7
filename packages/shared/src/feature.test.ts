import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { createFeatureSet, type Feature } from './feature.ts';
import { createSilentLogger } from './logger.ts';
import { recordingFeature, recordingInformer } from './testing/recording.ts';

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

  it('opens features after their informers started and runs beforeStart after the sync, both in list order', async () => {
    const journal: string[] = [];
    const set = createFeatureSet(
      [
        recordingFeature('a', [recordingInformer('x', journal)], journal, { beforeStart: true }),
        recordingFeature('listen', [], journal, { open: true }),
      ],
      { logger: createSilentLogger() },
    );
    const signal = new AbortController().signal;
    set.startInformers();
    await set.open(signal);
    assert.equal(await set.waitForSync(signal), true);
    await set.beforeStart(signal);
    set.start();
    assert.deepEqual(journal, ['start x', 'open listen', 'beforeStart a', 'start a', 'start listen']);
  });

  it('a feature that was opened is stopped even when the set never started (its connection is closed)', async () => {
    const journal: string[] = [];
    const set = createFeatureSet(
      [
        recordingFeature('a', [recordingInformer('x', journal, false)], journal),
        recordingFeature('listen', [], journal, { open: true }),
      ],
      { logger: createSilentLogger() },
    );
    await set.open(new AbortController().signal);
    assert.equal(await set.waitForSync(), false);
    await set.stop();
    assert.deepEqual(journal, ['open listen', 'stop listen', 'stop x']);
  });
});
