import assert from 'node:assert/strict';
import type { OperationRow } from '@gitops/db';
import { createSilentLogger, TerminalError } from '@gitops/shared';
import { describe, it } from 'vitest';
import { type AgentFeature, resourceHandlerOf } from './agent-feature.ts';

const TENANT = '5b0f8a52-3c1f-4d7e-9a55-0f1e2d3c4b5a';

function feature(name: string, handles: AgentFeature['handles']): AgentFeature {
  return { name, informers: [], handles, start: () => undefined, stop: async () => undefined };
}

describe('resourceHandlerOf', () => {
  it('dispatches each type to the feature that handles it, with the operations owners de-duplicated', async () => {
    const calls: string[] = [];
    const handle = resourceHandlerOf([
      feature('a', {
        Application: async (id, { ownerUserIds }) => {
          calls.push(`a ${id} ${ownerUserIds.join(',')}`);
          return { status: 'done', changed: false };
        },
      }),
      feature('b', {
        SyncOperation: async (id) => {
          calls.push(`b ${id}`);
          return { status: 'done', changed: true };
        },
      }),
    ]);
    const operations = [
      { owner_user_id: TENANT },
      { owner_user_id: TENANT },
      { owner_user_id: null },
    ] as OperationRow[];
    const context = { operations, signal: new AbortController().signal, logger: createSilentLogger() };
    assert.deepEqual(await handle({ type: 'Application', id: 'x' }, context), {
      status: 'done',
      changed: false,
    });
    await handle({ type: 'SyncOperation', id: 'y' }, { ...context, operations: [] });
    assert.deepEqual(calls, [`a x ${TENANT}`, 'b y']);
  });

  it('fails an unknown type terminally and refuses two features handling one type', async () => {
    const handle = resourceHandlerOf([feature('a', {})]);
    await assert.rejects(
      handle(
        { type: 'Unknown', id: 'x' },
        { operations: [], signal: new AbortController().signal, logger: createSilentLogger() },
      ),
      (err) =>
        err instanceof TerminalError &&
        err.message === 'Unknown operations are not supported by this cluster-agent version',
    );
    const claim = { AppProject: async () => ({ status: 'done', changed: false }) as const };
    assert.throws(() => resourceHandlerOf([feature('a', claim), feature('b', claim)]), /both a and b/);
  });
});
