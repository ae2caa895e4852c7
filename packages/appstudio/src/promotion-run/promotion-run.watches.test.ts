import assert from 'node:assert/strict';
import { PromotionRunState } from '@gitops/api';
import { describe, it } from 'vitest';
import { assertOwnEvents, binding, promotionRun, updated, useWatches } from '../testing/unit.ts';
import {
  type PromotionRunWatchDeps,
  promotionRunChanged,
  watchPromotionRunSources,
} from './promotion-run.watches.ts';

const complete = { state: PromotionRunState.Complete };

describe('PromotionRun watches: which events wake which runs', () => {
  const watch = useWatches<PromotionRunWatchDeps>(
    ['promotionRuns', 'bindings'],
    { predicates: [promotionRunChanged] },
    watchPromotionRunSources,
  );

  it('the run: created, its spec, a relist and its deletion wake it; its own status writes do not', async () => {
    await assertOwnEvents(watch, watch.sources.promotionRuns, promotionRun('run'), {
      ownWrite: { status: { promotionStartTime: '2026-01-01T00:00:00Z' } },
      changes: [(run) => updated(run, { spec: { application: 'app', snapshot: 'snap-2' } })],
      removed: true,
    });
  });

  it("another run's state changing, or its deletion, wakes the active runs of the same application", async () => {
    watch.sources.promotionRuns.put(promotionRun('waiting', {}, { state: PromotionRunState.Waiting }));
    watch.sources.promotionRuns.put(promotionRun('done', {}, complete));
    watch.sources.promotionRuns.put(promotionRun('other-app', { application: 'other' }));
    const first = promotionRun('first', {}, { state: PromotionRunState.Active });
    watch.sources.promotionRuns.put(first);
    const completed = updated(first, { status: complete });
    // Its own key stays asleep (a status write); the waiting run of its application wakes.
    assert.deepEqual(await watch.wakes(() => watch.sources.promotionRuns.put(completed)), ['ns/waiting']);
    const otherStatus = updated(completed, { status: { ...complete, promotionStartTime: 'x' } });
    assert.deepEqual(
      await watch.wakes(() => watch.sources.promotionRuns.put(otherStatus)),
      [],
      'a status write other than state',
    );
    assert.deepEqual(await watch.wakes(() => watch.sources.promotionRuns.remove(otherStatus)), [
      'ns/first',
      'ns/waiting',
    ]);
  });

  it('a binding created or changed wakes the active runs of its application; its deletion does not', async () => {
    watch.sources.promotionRuns.put(promotionRun('active', {}, { state: PromotionRunState.Active }));
    watch.sources.promotionRuns.put(promotionRun('done', {}, complete));
    watch.sources.promotionRuns.put(promotionRun('other-app', { application: 'other' }));
    const b = binding('b');
    assert.deepEqual(await watch.wakes(() => watch.sources.bindings.put(b)), ['ns/active']);
    const rolledUp = updated(b, {
      status: { gitopsDeployments: [{ componentName: 'web', syncStatus: 'Synced' }] },
    });
    assert.deepEqual(await watch.wakes(() => watch.sources.bindings.put(rolledUp)), ['ns/active']);
    assert.deepEqual(await watch.wakes(() => watch.sources.bindings.remove(rolledUp)), []);
  });
});
