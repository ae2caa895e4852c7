/**
 * The render's steps without an API server or a Git server: which images a binding gets from its Snapshot,
 * what each git failure tells the user and when it is looked at again (the unreachable backoff), the
 * condition's time a PromotionRun judges a refusal by, which PromotionRun a binding's render is for, what a
 * deleted binding's render forgets, and when the host is told of a push. (render.int.test.ts runs the same
 * branches end to end.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import type { BindingCr, PromotionRunCr, SnapshotCr } from '../objects.ts';
import { GitError } from './git.ts';
import {
  failWith,
  imagesOf,
  newRenderMemory,
  promotionRunOf,
  type RenderSteps,
  target,
  tellPushed,
} from './render.reconciler.ts';
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

/** Steps over plain objects: any API server call fails the test. */
function steps(over: Partial<RenderSteps> = {}): RenderSteps {
  const none = () => {
    throw new Error('not expected in this test');
  };
  return {
    kc: new Proxy({}, { get: none }) as RenderSteps['kc'],
    events: { event: none },
    now: () => new Date('2026-11-27T10:05:00Z'),
    shardLabels: {},
    gitOptions: { timeoutMs: 1_000, sshKnownHostsFile: '' },
    onPushed: none,
    bindings: { get: () => undefined },
    applications: { get: () => undefined },
    environments: { get: () => undefined },
    promotionRuns: { list: () => [] },
    memory: newRenderMemory(),
    ...over,
  };
}
const logger = { info: () => {}, debug: () => {}, warn: () => {} } as unknown as Parameters<typeof target>[2];

describe('the PromotionRun a render is for', () => {
  const run = (name: string, created: string, state?: string, snapshotName = 's1'): PromotionRunCr =>
    ({
      apiVersion: 'appstudio.redhat.com/v1alpha1',
      kind: 'PromotionRun',
      metadata: { name, namespace: 'team', creationTimestamp: created },
      spec: { application: 'shop', snapshot: snapshotName },
      ...(state ? { status: { state } } : {}),
    }) as PromotionRunCr;

  it('the newest running one of the same application and snapshot, else the newest one', () => {
    const runs = [
      run('old', '2026-11-27T09:00:00Z', 'Complete'),
      run('running', '2026-11-27T09:30:00Z'),
      run('newer-done', '2026-11-27T09:40:00Z', 'Complete'),
      run('other-snapshot', '2026-11-27T09:50:00Z', undefined, 's2'),
    ];
    const deps = steps({ promotionRuns: { list: () => runs } });
    const found = promotionRunOf(deps, binding(['web']));
    assert.equal(found?.run.metadata.name, 'running');
    assert.equal(found?.active, true);
    const done = steps({ promotionRuns: { list: () => runs.filter((r) => r.metadata.name !== 'running') } });
    assert.equal(promotionRunOf(done, binding(['web']))?.run.metadata.name, 'newer-done');
    assert.equal(promotionRunOf(done, binding(['web']))?.active, false);
    assert.equal(promotionRunOf(steps(), binding(['web'])), undefined);
  });
});

describe('what the render remembers', () => {
  it('a binding gone from the cache is forgotten, and nothing is read live', async () => {
    const deps = steps();
    deps.memory.rendered.set('team/shop-dev', 'f');
    deps.memory.unreachable.set('team/shop-dev', 3);
    deps.memory.pushNotTold.add('team/shop-dev');
    assert.equal(await target(deps, 'team/shop-dev', logger), undefined);
    assert.equal(deps.memory.rendered.size + deps.memory.unreachable.size + deps.memory.pushNotTold.size, 0);
  });

  it('an unreachable repository is looked at again after 2 s, doubling to 2 min', async () => {
    const failed = {
      type: 'GitOpsResourcesGenerated',
      status: 'False' as const,
      reason: 'GenerateError',
      message: 'could not be reached',
      lastTransitionTime: '2026-11-27T10:00:00Z',
      observedGeneration: 3,
    };
    // The condition is already this failure's: nothing is written.
    const bound = binding(['web'], { gitopsRepoConditions: [failed] });
    const deps = steps();
    deps.memory.rendered.set('team/shop-dev', 'f');
    const waits: unknown[] = [];
    for (let i = 0; i < 8; i++) {
      const failure = { message: 'could not be reached', retry: 'backoff' as const, reason: 'GenerateError' };
      waits.push((await failWith(deps, 'team/shop-dev', bound, undefined, failure))?.requeueAfter);
    }
    assert.deepEqual(waits, [2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 120_000, 120_000]);
    assert.equal(deps.memory.rendered.has('team/shop-dev'), false);
    const waitForUser = {
      message: 'could not be reached',
      retry: USER_FIX_RETRY_MS,
      reason: 'GenerateError',
    };
    assert.deepEqual(await failWith(deps, 'team/shop-dev', bound, undefined, waitForUser), {
      requeueAfter: USER_FIX_RETRY_MS,
    });
  });

  it('the host is told of a pushed commit until telling it succeeds, and not of an unchanged render', async () => {
    const told: unknown[] = [];
    let fail = true;
    const deps = steps({
      onPushed: async (push) => {
        if (fail) throw new Error('the database is away');
        told.push(push);
      },
    });
    const key = 'team/shop-dev';
    await assert.rejects(tellPushed(deps, key, binding(['web']), repo, { commit: 'c1', pushed: true }));
    fail = false;
    // The next pass pushes nothing (the render is unchanged), but the host was not told yet.
    await tellPushed(deps, key, binding(['web']), repo, { commit: 'c1', pushed: false });
    await tellPushed(deps, key, binding(['web']), repo, { commit: 'c1', pushed: false });
    assert.deepEqual(told, [{ namespace: 'team', repoURL: repo.url, branch: 'main', commit: 'c1' }]);
  });
});
