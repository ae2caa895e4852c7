import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { createProgress, StepFailure, shouldProcess } from './progress.ts';

const finished = (status: 'True' | 'False' | 'Unknown', lastTransitionGeneration: number | null) => ({
  conditions: [{ type: 'Finished', status, lastTransitionGeneration }],
});

describe('the gate', () => {
  it('processes a CR without status, without conditions, with an older or missing generation, or not Finished', () => {
    assert.equal(shouldProcess({ metadata: { generation: 1 } }), true);
    assert.equal(shouldProcess({ metadata: { generation: 1 }, status: { conditions: [] } }), true);
    assert.equal(shouldProcess({ metadata: { generation: 2 }, status: finished('True', 1) }), true);
    assert.equal(shouldProcess({ metadata: { generation: 2 }, status: finished('True', null) }), true);
    assert.equal(shouldProcess({ metadata: { generation: 2 }, status: finished('False', 2) }), true);
    assert.equal(shouldProcess({ metadata: { generation: 2 }, status: finished('Unknown', 2) }), true);
  });

  it('skips a CR that is Finished for its generation', () => {
    assert.equal(shouldProcess({ metadata: { generation: 3 }, status: finished('True', 3) }), false);
  });
});

describe('the condition bookkeeping', () => {
  const types = ['AcccesTokenSecretValid', 'FoundKafkaById', 'Finished'];
  const now = new Date('2026-01-02T03:04:05.678Z');

  it('turns conditions True step by step and Finished True at the end', () => {
    const p = createProgress(types);
    p.pass('AcccesTokenSecretValid');
    assert.deepEqual(
      p.conditions(undefined, 4, now).map((c) => c.status),
      ['True', 'Unknown', 'Unknown'],
    );
    p.pass('FoundKafkaById');
    p.finish();
    const conditions = p.conditions(undefined, 4, now);
    assert.deepEqual(
      conditions.map((c) => [c.status, c.lastTransitionGeneration, c.lastTransitionTime]),
      [
        ['True', 4, '2026-01-02T03:04:05Z'],
        ['True', 4, '2026-01-02T03:04:05Z'],
        ['True', 4, '2026-01-02T03:04:05Z'],
      ],
    );
    // Unchanged conditions keep their time.
    const later = createProgress(types);
    later.pass('AcccesTokenSecretValid');
    later.pass('FoundKafkaById');
    later.finish();
    assert.deepEqual(later.conditions(conditions, 4, new Date('2030-01-01T00:00:00Z')), conditions);
    // The same verdict about a newer generation is a new transition.
    assert.deepEqual(
      later
        .conditions(conditions, 5, new Date('2030-01-01T00:00:00Z'))
        .map((c) => [c.lastTransitionGeneration, c.lastTransitionTime]),
      [
        [5, '2030-01-01T00:00:00Z'],
        [5, '2030-01-01T00:00:00Z'],
        [5, '2030-01-01T00:00:00Z'],
      ],
    );
  });

  it('a failing step sets its condition and Finished False with the same reason and message, and stops', () => {
    const p = createProgress(types);
    p.pass('AcccesTokenSecretValid');
    assert.throws(() => p.fail('FoundKafkaById', 'ApiException', 'Error 404: gone'), StepFailure);
    assert.deepEqual(
      p.conditions(undefined, 1, now).map((c) => [c.type, c.status, c.reason, c.message]),
      [
        ['AcccesTokenSecretValid', 'True', '', ''],
        ['FoundKafkaById', 'False', 'ApiException', 'Error 404: gone'],
        ['Finished', 'False', 'ApiException', 'Error 404: gone'],
      ],
    );
  });

  it('a failure of Finished alone (validation) leaves every other condition Unknown', () => {
    const p = createProgress(types);
    assert.throws(() =>
      p.fail('Finished', 'InvalidUserInput', 'Missing argument spec in CR, spec should not be null'),
    );
    assert.deepEqual(
      p.conditions(undefined, 1, now).map((c) => c.status),
      ['Unknown', 'Unknown', 'False'],
    );
  });
});
