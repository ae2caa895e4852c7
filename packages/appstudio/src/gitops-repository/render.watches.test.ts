import assert from 'node:assert/strict';
import { handInformer } from '@gitops/shared/testing';
import { describe, it } from 'vitest';
import type { BindingCr } from '../objects.ts';
import { application, binding, environment, promotionRun } from '../testing/unit.ts';
import { renderWatches } from './render.watches.ts';

/** The bindings of two applications and two environments, and the render's maps to their keys. */
function given() {
  const bindings = handInformer<BindingCr>();
  bindings.put(binding('app-dev-1', { application: 'app', environment: 'dev', snapshot: 'snap-1' }));
  bindings.put(binding('app-prod-2', { application: 'app', environment: 'prod', snapshot: 'snap-2' }));
  bindings.put(binding('other-dev-1', { application: 'other', environment: 'dev', snapshot: 'snap-1' }));
  bindings.put(binding('elsewhere', { application: 'app', environment: 'dev' }, {}, { namespace: 'ns-2' }));
  return renderWatches(bindings.informer);
}

describe('render watches: which bindings an event of another kind concerns', () => {
  it('a PromotionRun: the bindings of its application at its snapshot, in its namespace', () => {
    const watches = given();
    assert.deepEqual(
      watches.ofPromotionRun(promotionRun('run', { application: 'app', snapshot: 'snap-1' })),
      ['ns/app-dev-1'],
    );
    assert.deepEqual(
      watches.ofPromotionRun(promotionRun('run', { application: 'app', snapshot: 'snap-3' })),
      [],
    );
  });

  it('an Application: its bindings, in its namespace', () => {
    assert.deepEqual(given().ofApplication(application('app')).sort(), ['ns/app-dev-1', 'ns/app-prod-2']);
    assert.deepEqual(given().ofApplication(application('none')), []);
  });

  it('an Environment: its bindings, in its namespace', () => {
    assert.deepEqual(given().ofEnvironment(environment('dev')).sort(), ['ns/app-dev-1', 'ns/other-dev-1']);
    assert.deepEqual(given().ofEnvironment(environment('dev', {}, { namespace: 'ns-2' })), [
      'ns-2/elsewhere',
    ]);
  });
});
