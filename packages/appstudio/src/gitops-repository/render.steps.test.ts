/**
 * The render's steps without an API server or a Git server: which images a binding gets from its Snapshot,
 * what each git failure tells the user and when it is looked at again, and the condition's time a
 * PromotionRun judges a refusal by. (render.int.test.ts runs the same branches end to end.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import type { BindingCr, SnapshotCr } from '../objects.ts';
import { GitError } from './git.ts';
import { imagesOf } from './render.reconciler.ts';
import { gitFailureCondition, repoCondition, USER_FIX_RETRY_MS } from './render.status.ts';

const binding = (components: string[], status: BindingCr['status'] = {}, generation = 3): BindingCr => ({
  apiVersion: 'appstudio.redhat.com/v1alpha1',
  kind: 'SnapshotEnvironmentBinding',
  metadata: { name: 'shop-dev', namespace: 'team', generation },
  spec: {
    application: 'shop',
    environment: 'dev',
    snapshot: 's1',
    components: components.map((name) => ({ name })),
  },
  status,
});
const snapshot = (images: Record<string, string>): SnapshotCr => ({
  apiVersion: 'appstudio.redhat.com/v1alpha1',
  kind: 'Snapshot',
  metadata: { name: 's1', namespace: 'team' },
  spec: {
    application: 'shop',
    components: Object.entries(images).map(([name, containerImage]) => ({ name, containerImage })),
  },
});
const repo = { url: 'https://jane:s3cret@git.example.test/org/gitops.git', branch: 'main', context: '' };

describe('the images a binding gets from its Snapshot', () => {
  it('one per component of the binding, sorted by component', () => {
    assert.deepEqual(
      imagesOf(binding(['web', 'api']), snapshot({ web: 'web:1', api: 'api:1', extra: 'x:1' })),
      [
        { component: 'api', image: 'api:1' },
        { component: 'web', image: 'web:1' },
      ],
    );
  });

  it('a component the Snapshot has no image for is named in the message, and nothing is rendered', () => {
    assert.equal(
      imagesOf(binding(['web', 'api', 'db']), snapshot({ web: 'web:1', db: '' })),
      "Snapshot 's1' has no containerImage for component api, db",
    );
  });
});

describe('what a git failure tells the user', () => {
  it('a refused push, refused credentials and an untrusted host key wait for the user, each with its reason', () => {
    const cases = [
      [
        'refused',
        'PushRefused',
        /^the push to the GitOps repository https:\/\/git\.example\.test\/org\/gitops\.git \(branch main\) was refused: /,
      ],
      [
        'auth',
        'CredentialsRefused',
        /credentials for the GitOps repository .* were refused \(the namespace's RepositoryCredential for it\)/,
      ],
      ['hostKey', 'HostKeyNotTrusted', /SSH host key of the GitOps repository .* is not trusted/],
      ['notFound', 'GenerateError', /could not be read/],
    ] as const;
    for (const [failure, reason, message] of cases) {
      const condition = gitFailureCondition(new GitError(failure, 'git push: denied'), repo);
      assert.equal(condition.reason, reason);
      assert.equal(condition.retry, USER_FIX_RETRY_MS);
      assert.match(condition.message, message);
      assert.doesNotMatch(condition.message, /s3cret|jane/);
    }
  });

  it('an unreachable repository is retried with backoff', () => {
    const condition = gitFailureCondition(new GitError('unreachable', 'git fetch: timed out'), repo);
    assert.equal(condition.retry, 'backoff');
    assert.match(condition.message, /could not be reached, retrying: git fetch: timed out$/);
  });
});

describe('the condition a PromotionRun reads', () => {
  const failed = {
    type: 'GitOpsResourcesGenerated',
    status: 'False' as const,
    reason: 'PushRefused',
    message: 'the push was refused',
    lastTransitionTime: '2026-11-27T10:00:00Z',
    observedGeneration: 3,
  };
  const now = new Date('2026-11-27T10:05:00Z');

  it('the same verdict keeps its time, so a refusal from before a promotion step is not taken as about it…', () => {
    const [condition] = repoCondition(
      binding(['web'], { gitopsRepoConditions: [failed] }),
      { ok: false, message: 'the push was refused', reason: 'PushRefused' },
      now,
    );
    assert.equal(condition?.lastTransitionTime, '2026-11-27T10:00:00Z');
  });

  it('…unless the step started after it: then it gets a new time (the run ends on it only then)', () => {
    const [condition] = repoCondition(
      binding(['web'], { gitopsRepoConditions: [failed] }),
      {
        ok: false,
        message: 'the push was refused',
        reason: 'PushRefused',
        freshSince: '2026-11-27T10:01:00Z',
      },
      now,
    );
    assert.equal(condition?.lastTransitionTime, '2026-11-27T10:05:00Z');
    assert.equal(condition?.observedGeneration, 3);
  });
});
