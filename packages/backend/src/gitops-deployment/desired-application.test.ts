import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import {
  desiredApplicationSpec,
  INVALID_DESTINATION_NAMESPACE,
  parseGitOpsDeploymentSpec,
} from './desired-application.ts';

const source = { repoURL: 'https://github.com/org/repo', path: 'env/dev' };

function desired(spec: unknown, namespace = 'jane') {
  const parsed = parseGitOpsDeploymentSpec(spec);
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.problem);
  return desiredApplicationSpec(parsed.spec, namespace);
}

describe('desired Argo CD Application spec of a GitOpsDeployment', () => {
  test('automated: automated policy, background prune propagation first, user options after, unlimited retry', () => {
    assert.deepEqual(
      desired({
        source: { ...source, targetRevision: 'main' },
        type: 'automated',
        syncPolicy: { syncOptions: ['CreateNamespace=true'] },
      }),
      {
        source: { ...source, targetRevision: 'main' },
        destination: { namespace: 'jane' },
        syncPolicy: {
          automated: { prune: true, selfHeal: true, allowEmpty: true },
          syncOptions: ['PrunePropagationPolicy=background', 'CreateNamespace=true'],
          retry: { limit: -1, backoff: { duration: '5s', factor: 2, maxDuration: '3m' } },
        },
      },
    );
  });

  test('manual without sync options has no syncPolicy at all', () => {
    assert.deepEqual(desired({ source, type: 'manual' }), {
      source: { ...source, targetRevision: '' },
      destination: { namespace: 'jane' },
    });
  });

  test('manual with sync options has only the user options', () => {
    assert.deepEqual(
      desired({ source, type: 'manual', syncPolicy: { syncOptions: ['CreateNamespace=false'] } }).syncPolicy,
      {
        syncOptions: ['CreateNamespace=false'],
      },
    );
  });

  test('never contains project or destination.name (the agent derives them)', () => {
    const spec = desired({ source, type: 'automated' }) as Record<string, Record<string, unknown>>;
    assert.equal(spec.project, undefined);
    assert.deepEqual(Object.keys(spec.destination ?? {}), ['namespace']);
  });

  test('malformed specs are reported, not thrown', () => {
    for (const bad of [
      undefined,
      {},
      { source, type: 'sometimes' },
      { source: { ...source, path: '/' }, type: 'manual' },
      { source: { repoURL: 'x' }, type: 'manual' },
      { source, type: 'manual', syncPolicy: { syncOptions: ['Prune=true'] } },
    ]) {
      const parsed = parseGitOpsDeploymentSpec(bad);
      assert.equal(parsed.ok, false, JSON.stringify(bad));
      if (!parsed.ok) assert.match(parsed.problem, /^spec/);
    }
  });

  test('a destination namespace that is no namespace name (an object stored before the admission rule) is reported with the original message', () => {
    assert.match(
      INVALID_DESTINATION_NAMESPACE,
      /^the namespace specified in the destination field is invalid: /,
    );
    for (const namespace of ['Jane', 'jane_1', '-jane', 'a.b', 'x'.repeat(64)]) {
      const parsed = parseGitOpsDeploymentSpec({
        source,
        type: 'manual',
        destination: { environment: 'env', namespace },
      });
      assert.deepEqual(parsed, {
        ok: false,
        problem: `spec.destination.namespace: ${INVALID_DESTINATION_NAMESPACE}`,
      });
    }
    for (const namespace of ['', 'jane', 'team-1', 'x'.repeat(63)]) {
      const spec = { source, type: 'manual', destination: { environment: 'env', namespace } };
      assert.equal(parseGitOpsDeploymentSpec(spec).ok, true, namespace);
    }
  });
});
