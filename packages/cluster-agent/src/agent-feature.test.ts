import assert from 'node:assert/strict';
import type { OperationRow, ResourceOperation } from '@gitops/db';
import { createSilentLogger, TerminalError } from '@gitops/shared';
import { describe, it } from 'vitest';
import { type AgentFeature, resourceHandlerOf } from './agent-feature.ts';

const TENANT = '5b0f8a52-3c1f-4d7e-9a55-0f1e2d3c4b5a';

function feature(name: string, handles: AgentFeature['handles']): AgentFeature {
  return { name, informers: [], handles, start: () => undefined, stop: async () => undefined };
}

const operations = [
  { id: 'o1', owner_user_id: TENANT },
  { id: 'o2', owner_user_id: TENANT },
  { id: 'o3', owner_user_id: null },
] as OperationRow[];
const context = { operations, signal: new AbortController().signal, logger: createSilentLogger() };

describe('resourceHandlerOf', () => {
  it('starts the operations and dispatches each type to the feature that handles it, owners de-duplicated', async () => {
    const calls: string[] = [];
    const found: ResourceOperation[] = [{ outcome: 'started', operation: operations[0] as OperationRow }];
    const handle = resourceHandlerOf(
      [
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
      ],
      async (resource) => {
        calls.push(`start ${resource.type}/${resource.id}`);
        return found;
      },
    );
    const begun = await handle({ type: 'Application', id: 'x' });
    assert.equal(begun.found, found);
    assert.deepEqual(await begun.run(context), { status: 'done', changed: false });
    await (await handle({ type: 'SyncOperation', id: 'y' })).run({ ...context, operations: [] });
    assert.deepEqual(calls, ['start Application/x', `a x ${TENANT}`, 'start SyncOperation/y', 'b y']);
  });

  it('lets a handler that reads with the start begin the reconcile itself, and runs it with what it read', async () => {
    const calls: string[] = [];
    const found: ResourceOperation[] = [{ outcome: 'in-progress', operation: operations[2] as OperationRow }];
    const handle = resourceHandlerOf(
      [
        feature('a', {
          Application: {
            async begin(id) {
              calls.push(`begin ${id}`);
              const read = `row ${id}`;
              return {
                found,
                reconcile: async ({ ownerUserIds }) => {
                  calls.push(`reconcile ${read} ${ownerUserIds.join(',')}`);
                  return { status: 'done', changed: true };
                },
              };
            },
          },
        }),
      ],
      async () => {
        throw new Error('the default start must not run for a handler that begins itself');
      },
    );
    const begun = await handle({ type: 'Application', id: 'x' });
    assert.equal(begun.found, found);
    assert.deepEqual(await begun.run(context), { status: 'done', changed: true });
    assert.deepEqual(calls, ['begin x', `reconcile row x ${TENANT}`]);
  });

  it('fails an unknown type terminally (its operations started) and refuses two features handling one type', async () => {
    const started: string[] = [];
    const handle = resourceHandlerOf([feature('a', {})], async (resource) => {
      started.push(resource.id);
      return [];
    });
    const begun = await handle({ type: 'Unknown', id: 'x' });
    assert.deepEqual(started, ['x']);
    await assert.rejects(
      begun.run({ ...context, operations: [] }),
      (err) =>
        err instanceof TerminalError &&
        err.message === 'Unknown operations are not supported by this cluster-agent version',
    );
    const claim = { AppProject: async () => ({ status: 'done', changed: false }) as const };
    const start = async () => [];
    assert.throws(() => resourceHandlerOf([feature('a', claim), feature('b', claim)], start), /both a and b/);
  });
});
