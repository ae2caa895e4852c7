import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { AgentAnnotation, REFRESH_ANNOTATION } from '../argocd.ts';
import { refreshPatch, servedRefreshOf } from './refresh.ts';

const app = (annotations?: Record<string, string>) => ({
  apiVersion: 'argoproj.io/v1alpha1',
  kind: 'Application',
  metadata: { name: 'a', ...(annotations ? { annotations } : {}) },
});

describe('the refresh patch and the request it records', () => {
  it("asks Argo CD for a normal refresh and records the request's time", () => {
    const requested = new Date('2026-11-29T18:00:00.123Z');
    assert.deepEqual(refreshPatch(requested), {
      metadata: {
        annotations: {
          [REFRESH_ANNOTATION]: 'normal',
          [AgentAnnotation.RefreshServed]: '2026-11-29T18:00:00.123Z',
        },
      },
    });
    const recorded = { [AgentAnnotation.RefreshServed]: requested.toISOString() };
    assert.equal(servedRefreshOf(app(recorded)), requested.getTime());
  });

  it('none recorded, or a value that is no time (hand-edited), serves no request', () => {
    assert.equal(servedRefreshOf(undefined), undefined);
    assert.equal(servedRefreshOf(app()), undefined);
    assert.equal(servedRefreshOf(app({ [AgentAnnotation.RefreshServed]: 'yesterday-ish' })), undefined);
  });
});
