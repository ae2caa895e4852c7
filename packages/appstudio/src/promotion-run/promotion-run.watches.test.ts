import assert from 'node:assert/strict';
import { PromotionRunState } from '@gitops/api';
import { handInformer } from '@gitops/shared/testing';
import { afterEach, beforeEach, describe, it } from 'vitest';
import type { BindingCr, PromotionRunCr } from '../objects.ts';
import { binding, promotionRun, updated, wiredController } from '../testing/unit.ts';
import { promotionRunChanged, watchPromotionRunSources } from './promotion-run.watches.ts';

const complete = { state: PromotionRunState.Complete };

describe('PromotionRun watches: which events wake which runs', () => {
  let runs: ReturnType<typeof handInformer<PromotionRunCr>>;
  let bindings: ReturnType<typeof handInformer<BindingCr>>;
  let controller: ReturnType<typeof wiredController>;
  beforeEach(() => {
    runs = handInformer<PromotionRunCr>();
    bindings = handInformer<BindingCr>();
    const deps = { promotionRuns: runs.informer, bindings: bindings.informer };
    controller = wiredController(runs.informer, { predicates: [promotionRunChanged] }, (b) =>
      watchPromotionRunSources(b, deps),
    );
  });
  afterEach(() => controller.stop());

  it('the run: created, its spec, a relist and its deletion wake it; its own status writes do not', async () => {
    const run = promotionRun('run');
    assert.deepEqual(await controller.wakes(() => runs.put(run)), ['ns/run']);
    const written = updated(run, { status: { promotionStartTime: '2026-01-01T00:00:00Z' } });
    assert.deepEqual(await controller.wakes(() => runs.put(written)), []);
    assert.deepEqual(await controller.wakes(() => runs.put(written)), ['ns/run'], 'relist');
    const respecced = updated(written, { spec: { application: 'app', snapshot: 'snap-2' } });
    assert.deepEqual(await controller.wakes(() => runs.put(respecced)), ['ns/run']);
    assert.deepEqual(await controller.wakes(() => runs.remove(respecced)), ['ns/run']);
  });

  it("another run's state changing, or its deletion, wakes the active runs of the same application", async () => {
    runs.put(promotionRun('waiting', {}, { state: PromotionRunState.Waiting }));
    runs.put(promotionRun('done', {}, complete));
    runs.put(promotionRun('other-app', { application: 'other' }));
    const first = promotionRun('first', {}, { state: PromotionRunState.Active });
    runs.put(first);
    const completed = updated(first, { status: complete });
    // Its own key stays asleep (a status write); the waiting run of its application wakes.
    assert.deepEqual(await controller.wakes(() => runs.put(completed)), ['ns/waiting']);
    const otherStatus = updated(completed, { status: { ...complete, promotionStartTime: 'x' } });
    assert.deepEqual(
      await controller.wakes(() => runs.put(otherStatus)),
      [],
      'a status write other than state',
    );
    assert.deepEqual(await controller.wakes(() => runs.remove(otherStatus)), ['ns/first', 'ns/waiting']);
  });

  it('a binding created or changed wakes the active runs of its application; its deletion does not', async () => {
    runs.put(promotionRun('active', {}, { state: PromotionRunState.Active }));
    runs.put(promotionRun('done', {}, complete));
    runs.put(promotionRun('other-app', { application: 'other' }));
    const b = binding('b');
    assert.deepEqual(await controller.wakes(() => bindings.put(b)), ['ns/active']);
    const rolledUp = updated(b, {
      status: { gitopsDeployments: [{ componentName: 'web', syncStatus: 'Synced' }] },
    });
    assert.deepEqual(await controller.wakes(() => bindings.put(rolledUp)), ['ns/active']);
    assert.deepEqual(await controller.wakes(() => bindings.remove(rolledUp)), []);
  });
});
