import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { classifyGitFailure, hostKeyProblem, redact, withoutUserInfo } from './git.ts';
import { managedElsewhere, renderStateOf } from './render.status.ts';
import { commitMessage, gitOpsRepositoryOf, overlayPath, parseImage, renderOverlay } from './render.ts';

describe('rendering a Snapshot into an overlay', () => {
  it('splits image references into repository, tag and digest', () => {
    assert.deepEqual(parseImage('quay.io/org/web@sha256:abc'), {
      name: 'quay.io/org/web',
      digest: 'sha256:abc',
    });
    assert.deepEqual(parseImage('localhost:5000/web:1.2'), { name: 'localhost:5000/web', tag: '1.2' });
    assert.deepEqual(parseImage('localhost:5000/web:1.2@sha256:ab'), {
      name: 'localhost:5000/web',
      tag: '1.2',
      digest: 'sha256:ab',
    });
    assert.deepEqual(parseImage('web'), { name: 'web' });
  });

  it('creates an overlay of the base that pins the image by digest', () => {
    const text = renderOverlay(undefined, {
      component: 'web',
      image: 'quay.io/org/web:1@sha256:abc',
      env: [],
    });
    assert.equal(
      text,
      [
        'apiVersion: kustomize.config.k8s.io/v1beta1',
        'kind: Kustomization',
        'resources:',
        '  - ../../base',
        'images:',
        '  - name: quay.io/org/web',
        '    digest: sha256:abc',
        '',
      ].join('\n'),
    );
  });

  it("changes only the image entry and the Environment's variables of an existing overlay, comments kept", () => {
    const existing = [
      '# prod overlay',
      'resources:',
      '  - ../../base',
      'patches:',
      '  - path: replicas.yaml',
      'images:',
      '  - name: other/sidecar',
      '    newTag: "3"',
      '  - name: quay.io/org/web',
      '    digest: sha256:old',
      'configMapGenerator:',
      '  - name: web-environment',
      '    literals: [OLD=1]',
      '',
    ].join('\n');
    const text = renderOverlay(existing, {
      component: 'web',
      image: 'quay.io/org/web:2.0',
      env: [{ name: 'MODE', value: 'prod' }],
    });
    assert.match(text, /^# prod overlay/);
    assert.match(text, /patches:\n {2}- path: replicas.yaml/);
    assert.match(text, /- name: other\/sidecar\n {4}newTag: "3"/);
    assert.match(text, /- name: quay.io\/org\/web\n {4}newTag: "2.0"\n/);
    assert.doesNotMatch(text, /sha256:old|OLD=1/);
    assert.match(text, /- name: web-environment\n {4}literals:\n {6}- MODE=prod/);
    assert.equal(
      renderOverlay(text, {
        component: 'web',
        image: 'quay.io/org/web:2.0',
        env: [{ name: 'MODE', value: 'prod' }],
      }),
      text,
    );
  });

  it('reads the repository of an Application that asks for rendering, and only of one that does', () => {
    const annotations = { 'managed-gitops.redhat.com/render-gitops-repository': 'true' };
    assert.equal(
      gitOpsRepositoryOf({ metadata: {}, spec: { gitOpsRepository: { url: 'https://h/r' } } } as never),
      undefined,
    );
    const repo = gitOpsRepositoryOf({
      metadata: { annotations },
      spec: { gitOpsRepository: { url: 'https://h/r', context: './apps/' } },
    } as never);
    assert.deepEqual(repo, { url: 'https://h/r', branch: 'main', context: 'apps' });
    assert.equal(overlayPath(repo as never, 'web', 'dev'), 'apps/components/web/overlays/dev');
    assert.match(
      String(gitOpsRepositoryOf({ metadata: { annotations }, spec: {} } as never)),
      /no spec.gitOpsRepository.url/,
    );
    assert.match(
      String(
        gitOpsRepositoryOf({
          metadata: { annotations },
          spec: { gitOpsRepository: { url: 'u', context: '../x' } },
        } as never),
      ),
      /inside the repository/,
    );
  });

  it('names the Snapshot, the Environment and the PromotionRun in the commit message', () => {
    const message = commitMessage({
      snapshot: 's1',
      environment: 'dev',
      application: 'shop',
      promotionRun: 'shop-s1',
      binding: 'b',
      images: [{ component: 'web', image: 'quay.io/org/web@sha256:1' }],
    });
    assert.equal(message.split('\n')[0], 'Promote Snapshot s1 to Environment dev');
    assert.match(message, /By: PromotionRun shop-s1\n/);
    assert.match(message, /web: quay.io\/org\/web@sha256:1/);
  });
});

describe("git's answers", () => {
  it('tells a conflict from a refusal, bad credentials, a missing repository and an unreachable one', () => {
    assert.equal(
      classifyGitFailure(' ! [rejected]        HEAD -> main (fetch first)\nerror: failed to push some refs'),
      'conflict',
    );
    assert.equal(
      classifyGitFailure(
        'remote: main is protected\n ! [remote rejected] HEAD -> main (pre-receive hook declined)',
      ),
      'refused',
    );
    assert.equal(
      classifyGitFailure("fatal: unable to access 'https://h/r.git/': The requested URL returned error: 403"),
      'refused',
    );
    assert.equal(classifyGitFailure("fatal: Authentication failed for 'https://h/r.git/'"), 'auth');
    assert.equal(classifyGitFailure("fatal: couldn't find remote ref refs/heads/nope"), 'notFound');
    assert.equal(
      classifyGitFailure("fatal: unable to access 'https://h/r.git/': Failed to connect to h port 443"),
      'unreachable',
    );
    assert.equal(
      classifyGitFailure("fatal: unable to access 'https://h/r.git/': The requested URL returned error: 503"),
      'unreachable',
    );
  });

  it("tells a host key ssh refused, in ssh's verdict and the server's fingerprint, without the banner", () => {
    const changed = [
      '@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@',
      '@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @',
      '@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@',
      'IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!',
      'The fingerprint for the ED25519 key sent by the remote host is',
      'SHA256:AbCdEf0123456789.',
      'Offending ED25519 key in /etc/gitops/ssh_known_hosts:1',
      'Host key for [127.0.0.1]:2222 has changed and you have requested strict checking.',
      'Host key verification failed.',
      'fatal: Could not read from remote repository.',
    ].join('\n');
    assert.equal(classifyGitFailure(changed), 'hostKey');
    assert.equal(
      hostKeyProblem(changed),
      "Host key for [127.0.0.1]:2222 has changed and you have requested strict checking. the server's key is SHA256:AbCdEf0123456789",
    );
    const unknown =
      'No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking.\r\nHost key verification failed.\r\nfatal: Could not read from remote repository.';
    assert.equal(classifyGitFailure(unknown), 'hostKey');
    assert.equal(
      hostKeyProblem(unknown),
      'No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking.',
    );
  });

  it('never shows a credential or the user information of a URL', () => {
    assert.equal(withoutUserInfo('https://jane:s3cret@h/r.git'), 'https://h/r.git');
    const shown = redact("fatal: Authentication failed for 'https://jane:s3cret@h/r.git/'\nhint: x", [
      's3cret',
    ]);
    assert.doesNotMatch(shown, /s3cret|jane/);
    assert.equal(redact('error: token abcd-secret-value leaked', ['abcd-secret-value']), 'token *** leaked');
  });
});

describe('who renders a binding, and what a PromotionRun reads from it', () => {
  const binding = (generation: number, status: Record<string, unknown>, managedFields: unknown[] = []) =>
    ({ metadata: { name: 'b', generation, managedFields }, status }) as never;
  const condition = (status: string, observedGeneration?: number) => ({
    type: 'GitOpsResourcesGenerated',
    status,
    reason: status === 'True' ? 'GenerateSuccess' : 'GenerateError',
    message: status === 'True' ? 'rendered' : 'the push was refused',
    lastTransitionTime: '2026-11-26T00:00:00Z',
    ...(observedGeneration === undefined ? {} : { observedGeneration }),
  });

  it('another field manager of status.components or gitopsRepoConditions is the writer; ours and others are not', () => {
    const fields = (f: Record<string, unknown>) => ({ 'f:status': f });
    assert.equal(
      managedElsewhere(
        binding(1, {}, [
          { manager: 'gitops-appstudio', fieldsV1: fields({ 'f:components': {} }) },
          { manager: 'kubectl', fieldsV1: { 'f:metadata': {} } },
        ]),
      ),
      undefined,
    );
    assert.equal(
      managedElsewhere(
        binding(1, {}, [{ manager: 'application-service', fieldsV1: fields({ 'f:components': {} }) }]),
      ),
      'application-service',
    );
    assert.equal(
      managedElsewhere(
        binding(1, {}, [{ manager: 'has', fieldsV1: fields({ 'f:gitopsRepoConditions': {} }) }]),
      ),
      'has',
    );
  });

  it('a render of an older generation is still rendering; a failure of this one is failed; conditions of another service count as ready', () => {
    assert.deepEqual(renderStateOf(binding(2, { gitopsRepoConditions: [condition('True', 1)] })), {
      state: 'rendering',
    });
    assert.deepEqual(renderStateOf(binding(2, { gitopsRepoConditions: [condition('False', 1)] })), {
      state: 'rendering',
    });
    assert.deepEqual(renderStateOf(binding(2, { gitopsRepoConditions: [condition('False', 2)] })), {
      state: 'failed',
      message: 'the push was refused',
      refused: false,
      since: '2026-11-26T00:00:00Z',
    });
    // A refusal (a refused push or credentials, an untrusted host key) is one, with its time.
    for (const reason of ['PushRefused', 'CredentialsRefused', 'HostKeyNotTrusted'])
      assert.deepEqual(
        renderStateOf(binding(2, { gitopsRepoConditions: [{ ...condition('False', 2), reason }] })),
        { state: 'failed', message: 'the push was refused', refused: true, since: '2026-11-26T00:00:00Z' },
      );
    assert.deepEqual(renderStateOf(binding(2, { gitopsRepoConditions: [condition('True', 2)] })), {
      state: 'ready',
    });
    assert.deepEqual(renderStateOf(binding(2, { gitopsRepoConditions: [condition('True')] })), {
      state: 'ready',
    });
    assert.deepEqual(renderStateOf(binding(2, {})), { state: 'ready' });
  });
});
