import assert from 'node:assert/strict';
import type { ApplicationRow, Db } from '@gitops/db';
import type { Logger } from '@gitops/shared';
import { describe, it } from 'vitest';
import { awaitingRelease, completeAdoption, moveStepOf, RELEASE_RECHECK_MS } from './tenant-move.ts';

const HERE = '11111111-1111-4111-8111-111111111111';
const THERE = '22222222-2222-4222-8222-222222222222';

const row = (engine: string, releasing: string | null) =>
  ({
    id: '33333333-3333-4333-8333-333333333333',
    name: 'gitopsdepl-1',
    engine_instance_id: engine,
    releasing_engine_instance_id: releasing,
  }) as ApplicationRow;

describe('moveStepOf', () => {
  it('says where an application row stands in a tenant move, seen from this instance', () => {
    assert.equal(moveStepOf(row(HERE, null), HERE), 'none');
    // Moved away; whether or not this instance still releases it.
    assert.equal(moveStepOf(row(THERE, HERE), HERE), 'release');
    assert.equal(moveStepOf(row(THERE, null), HERE), 'release');
    // Moved here; the instance it left still holds its Application.
    assert.equal(moveStepOf(row(HERE, THERE), HERE), 'await-release');
    // Released to this instance.
    assert.equal(moveStepOf(row(HERE, HERE), HERE), 'adopt');
  });

  it('waits for the releasing instance, looking again every 5 s', () => {
    const outcome = awaitingRelease(row(HERE, THERE));
    assert.equal(outcome.status, 'pending');
    assert.equal(outcome.status === 'pending' && outcome.requeueAfterMs, RELEASE_RECHECK_MS);
    assert.match(outcome.status === 'pending' ? outcome.reason : '', new RegExp(`${THERE}.*gitopsdepl-1`));
  });
});

describe('completeAdoption', () => {
  it('touches the database only for a row being adopted', async () => {
    const untouchable = new Proxy({} as Db, {
      get() {
        throw new Error('the database was used');
      },
    });
    const logger = { info: () => assert.fail('nothing to log') } as unknown as Logger;
    for (const step of [row(HERE, null), row(HERE, THERE), row(THERE, HERE)])
      await completeAdoption({ db: untouchable, engineInstanceId: HERE }, step, logger);
    await assert.rejects(
      completeAdoption({ db: untouchable, engineInstanceId: HERE }, row(HERE, HERE), logger),
      /the database was used/,
    );
  });
});
