import assert from 'node:assert/strict';
import type { KubeObject } from '@gitops/shared';
import { describe, test } from 'vitest';
import { isAutomated, onTheWay } from './on-the-way.ts';

describe('states Argo CD is on its way from: queued (GITOPS_STATUS_QUEUED_INTERVAL) or progressing (GITOPS_STATUS_PROGRESS_INTERVAL)', () => {
  const state = (sync?: string, health?: string, phase?: string, condition?: string) => ({
    ...(sync ? { sync: { status: sync } } : {}),
    ...(health ? { health: { status: health } } : {}),
    ...(phase ? { operationState: { phase } } : {}),
    ...(condition ? { conditions: [{ type: condition, message: 'm' }] } : {}),
  });
  test.each([
    ['nothing reported yet', state(), true, 'queued'],
    [
      'an Application Argo CD has not looked at (projected Unknown/Unknown)',
      state('Unknown', 'Unknown'),
      true,
      'queued',
    ],
    ['not compared yet (Unknown/Unknown)', state('Unknown', 'Unknown'), false, 'queued'],
    ['compared nothing yet (health Unknown, no sync status)', state(undefined, 'Unknown'), true, 'queued'],
    [
      "Argo CD's first status (health Unknown, sync status empty)",
      { sync: { status: '' }, health: { status: 'Unknown' } },
      true,
      'queued',
    ],
    [
      "automated, OutOfSync, never synced (a create in Argo CD's queue)",
      state('OutOfSync', 'Missing'),
      true,
      'queued',
    ],
    ['a sync running', state('OutOfSync', 'Missing', 'Running'), false, 'progressing'],
    ['a sync terminating', state('Synced', 'Healthy', 'Terminating'), false, 'progressing'],
    ['health Progressing after a sync', state('Synced', 'Progressing', 'Succeeded'), false, 'progressing'],
    ['health Progressing before any sync', state('OutOfSync', 'Progressing'), true, 'progressing'],
    [
      'automated, OutOfSync after an earlier sync succeeded (about to sync again)',
      state('OutOfSync', 'Healthy', 'Succeeded'),
      true,
      'progressing',
    ],
  ])('on its way: %s', (_, projected, automated, expected) => {
    assert.equal(onTheWay(projected, automated), expected);
  });
  test.each([
    ['Synced and Healthy', state('Synced', 'Healthy', 'Succeeded'), true],
    ['Synced and Degraded', state('Synced', 'Degraded', 'Succeeded'), true],
    ['automated, OutOfSync and Degraded, never synced', state('OutOfSync', 'Degraded'), true],
    ['automated, OutOfSync and Degraded after a sync', state('OutOfSync', 'Degraded', 'Succeeded'), true],
    ['manual, OutOfSync (the user syncs it)', state('OutOfSync', 'Missing'), false],
    ['automated, OutOfSync after a failed sync', state('OutOfSync', 'Missing', 'Failed'), true],
    ['automated, OutOfSync after a sync error', state('OutOfSync', 'Missing', 'Error'), true],
    ['a comparison that failed (Unknown)', state('Unknown', 'Missing'), true],
    [
      'a comparison error (Unknown/Unknown and a condition)',
      state('Unknown', 'Unknown', undefined, 'ComparisonError'),
      true,
    ],
    ['Unknown/Unknown after a sync', state('Unknown', 'Unknown', 'Succeeded'), true],
    ['health reported alone', state(undefined, 'Healthy'), true],
  ])('settled, written at once: %s', (_, projected, automated) => {
    assert.equal(onTheWay(projected, automated), undefined);
  });
});

describe('isAutomated: whether Argo CD syncs the Application by itself', () => {
  const app = (syncPolicy?: unknown): KubeObject => ({
    metadata: { name: 'a', namespace: 'argocd' },
    spec: syncPolicy === undefined ? {} : { syncPolicy },
  });
  test.each([
    ['automated', { automated: { prune: true } }, true],
    ['automated with nothing set', { automated: {} }, true],
    ['automated, switched on', { automated: { enabled: true } }, true],
    ['automated, switched off', { automated: { enabled: false } }, false],
    ['no automated', { syncOptions: ['Validate=false'] }, false],
    ['no syncPolicy', undefined, false],
  ])('%s', (_, syncPolicy, expected) => {
    assert.equal(isAutomated(app(syncPolicy)), expected);
  });
});
