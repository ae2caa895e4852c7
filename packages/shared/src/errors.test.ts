import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { isTransientError, isTransientStatus, KubeApiError } from './errors.ts';

const kubeError = (statusCode: number) =>
  new KubeApiError({
    statusCode,
    method: 'GET',
    path: '/api/v1/namespaces/x',
    message: `status ${statusCode}`,
  });

describe('retry or not', () => {
  it('an HTTP answer is transient when there was none, when throttled, or on a server error', () => {
    assert.deepEqual(
      [0, 200, 400, 401, 403, 404, 409, 422, 429, 500, 502, 503].filter(isTransientStatus),
      [0, 429, 500, 502, 503],
    );
  });

  it('an API server error is transient on those statuses and on not found, conflict and gone; found in the cause chain', () => {
    assert.deepEqual(
      [0, 400, 403, 404, 409, 410, 422, 429, 500].filter((status) => isTransientError(kubeError(status))),
      [0, 404, 409, 410, 429, 500],
    );
    assert.equal(isTransientError(new Error('wrapped', { cause: kubeError(503) })), true);
    assert.equal(isTransientError(new Error('plain')), false);
  });
});
