import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { nextConditions } from './repository-credential.conditions.ts';
import { credentialsOfSecret, parseRepositoryCredentialSpec } from './repository-credential.secret.ts';
import { normalizeRepositoryUrl } from './repository-credential.store.ts';

const t0 = new Date('2026-01-01T00:00:00.000Z');
const t1 = new Date('2026-01-01T00:05:00.000Z');
const b64 = (s: string) => Buffer.from(s).toString('base64');
const secret = (type: string, data: Record<string, string>) => ({
  type,
  data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)])),
});
const TYPE = 'managed-gitops.redhat.com/repository-credential';

describe('RepositoryCredential conditions', () => {
  it('writes the valid triple in order', () => {
    const conditions = nextConditions([], { kind: 'valid', repository: 'https://h/r' }, t0, 3);
    assert.deepEqual(
      conditions.map((c) => [c.type, c.status, c.reason, c.message]),
      [
        ['ErrorOccurred', 'False', 'RepositoryCredentialUpToDate', 'RepositoryCredentials are Valid'],
        ['ValidRepositoryURL', 'True', 'ValidRepositoryUrl', 'Repository https://h/r exists'],
        [
          'ValidRepositoryCredential',
          'True',
          'RepositoryCredentialUpToDate',
          'RepositoryCredentials are Valid',
        ],
      ],
    );
    assert.ok(
      conditions.every((c) => c.observedGeneration === 3 && c.lastTransitionTime === '2026-01-01T00:00:00Z'),
    );
  });

  it('keeps lastTransitionTime when nothing changed, and moves it only for the conditions that changed', () => {
    const first = nextConditions([], { kind: 'valid', repository: 'https://h/r' }, t0, 1);
    assert.deepEqual(nextConditions(first, { kind: 'valid', repository: 'https://h/r' }, t1, 1), first);
    const rejected = nextConditions(
      first,
      { kind: 'invalidCredentials', repository: 'https://h/r', secret: 's' },
      t1,
      1,
    );
    assert.deepEqual(
      rejected.map((c) => [c.type, c.status, c.reason, c.lastTransitionTime]),
      [
        ['ErrorOccurred', 'True', 'InvalidCredentials', '2026-01-01T00:05:00Z'],
        ['ValidRepositoryURL', 'True', 'ValidRepositoryUrl', '2026-01-01T00:00:00Z'],
        ['ValidRepositoryCredential', 'False', 'InvalidCredentials', '2026-01-01T00:05:00Z'],
      ],
    );
  });

  it('a Failed operation sets ErrorOccurred and keeps the validation in the other two', () => {
    const conditions = nextConditions(
      [],
      { kind: 'valid', repository: 'https://h/r' },
      t0,
      1,
      'could not decrypt',
    );
    assert.deepEqual(
      conditions.map((c) => [c.type, c.status, c.reason, c.message]),
      [
        [
          'ErrorOccurred',
          'True',
          'ErrorOccurred',
          'the Argo CD repository Secret could not be updated: could not decrypt',
        ],
        ['ValidRepositoryURL', 'True', 'ValidRepositoryUrl', 'Repository https://h/r exists'],
        [
          'ValidRepositoryCredential',
          'True',
          'RepositoryCredentialUpToDate',
          'RepositoryCredentials are Valid',
        ],
      ],
    );
  });

  it('every failure reason is carried by all three conditions', () => {
    for (const [outcome, reason] of [
      [{ kind: 'secretNotSpecified' }, 'SecretNotSpecified'],
      [{ kind: 'secretNotFound', secret: 's' }, 'SecretNotFound'],
      [{ kind: 'secretInvalidType', secret: 's', type: 'kubernetes.io/tls' }, 'SecretInvalidType'],
      [{ kind: 'invalidRepositoryUrl', repository: 'https://h/r', detail: 'x' }, 'InvalidRepositoryUrl'],
    ] as const) {
      const conditions = nextConditions([], outcome, t0, undefined);
      assert.deepEqual(
        conditions.map((c) => [c.status, c.reason]),
        [
          ['True', reason],
          ['False', reason],
          ['False', reason],
        ],
      );
    }
  });
});

describe('RepositoryCredential spec and Secret parsing', () => {
  it('accepts spec.url as an alias of spec.repository', () => {
    assert.deepEqual(parseRepositoryCredentialSpec({ url: 'https://h/r', secret: 's' }), {
      repository: 'https://h/r',
      secret: 's',
      type: 'git',
    });
    assert.deepEqual(parseRepositoryCredentialSpec({ repository: 'https://h/a', secret: '' }), {
      repository: 'https://h/a',
      secret: '',
      type: 'git',
    });
  });

  it('reads spec.type: helm or oci as written, git otherwise', () => {
    for (const type of ['helm', 'oci'] as const) {
      assert.equal(parseRepositoryCredentialSpec({ repository: 'x', secret: 's', type }).type, type);
    }
    assert.equal(parseRepositoryCredentialSpec({ repository: 'x', secret: 's', type: 'svn' }).type, 'git');
  });

  it('a Helm repository or an OCI registry takes username and password, never an SSH key', () => {
    assert.deepEqual(credentialsOfSecret('s', secret(TYPE, { username: 'u', password: 'p' }), 'helm'), {
      ok: true,
      credentials: { username: 'u', password: 'p' },
    });
    assert.deepEqual(credentialsOfSecret('s', secret(TYPE, { sshPrivateKey: 'KEY' }), 'oci'), {
      ok: false,
      outcome: {
        kind: 'secretInvalidContent',
        secret: 's',
        problem: 'a repository of type oci takes username and password, not sshPrivateKey',
      },
    });
  });

  it('reads username/password or sshPrivateKey from a Secret of the right type', () => {
    assert.deepEqual(credentialsOfSecret('s', secret(TYPE, { username: 'u', password: 'p' })), {
      ok: true,
      credentials: { username: 'u', password: 'p' },
    });
    assert.deepEqual(credentialsOfSecret('s', secret(TYPE, { sshPrivateKey: 'KEY' })), {
      ok: true,
      credentials: { sshPrivateKey: 'KEY' },
    });
  });

  it('accepts an Opaque Secret, or one without a type, with the documented keys (a url key is ignored)', () => {
    const documented = { url: 'https://h/r', username: 'u', password: 'p' };
    for (const read of [
      credentialsOfSecret('s', secret('Opaque', documented)),
      credentialsOfSecret('s', { data: secret('', documented).data }),
    ]) {
      assert.deepEqual(read, { ok: true, credentials: { username: 'u', password: 'p' } });
    }
    assert.deepEqual(credentialsOfSecret('s', secret('Opaque', { sshPrivateKey: 'KEY' })), {
      ok: true,
      credentials: { sshPrivateKey: 'KEY' },
    });
    const unrelated = credentialsOfSecret('s', secret('Opaque', { token: 'x' }));
    assert.equal(!unrelated.ok && unrelated.outcome.kind, 'secretInvalidContent');
  });

  it('rejects another Secret type and incomplete credentials without echoing values', () => {
    const wrongType = credentialsOfSecret(
      's',
      secret('kubernetes.io/basic-auth', { username: 'u', password: 'p' }),
    );
    assert.equal(wrongType.ok, false);
    assert.equal(!wrongType.ok && wrongType.outcome.kind, 'secretInvalidType');
    const onlyUser = credentialsOfSecret('s', secret(TYPE, { username: 'u-secret-value' }));
    assert.equal(onlyUser.ok, false);
    assert.ok(!JSON.stringify(onlyUser).includes('u-secret-value'));
    const empty = credentialsOfSecret('s', secret(TYPE, {}));
    assert.equal(!empty.ok && empty.outcome.kind, 'secretInvalidContent');
  });

  it('reports binary or control-character credentials by key, never by value', () => {
    const raw = (data: Record<string, Buffer>) => ({
      type: TYPE,
      data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, v.toString('base64')])),
    });
    const cases: [Record<string, Buffer>, string][] = [
      [
        { username: Buffer.from('u'), password: Buffer.from([0x70, 0x00, 0xff, 0xfe, 0x41]) },
        'password is not UTF-8 text (binary data)',
      ],
      [
        { username: Buffer.from('planted\u0000user'), password: Buffer.from('p') },
        'username contains control characters',
      ],
      [
        { sshPrivateKey: Buffer.from('-----KEY-----\nplanted\u0007\n') },
        'sshPrivateKey contains control characters',
      ],
    ];
    for (const [data, problem] of cases) {
      const read = credentialsOfSecret('s', raw(data));
      assert.deepEqual(read, { ok: false, outcome: { kind: 'secretInvalidContent', secret: 's', problem } });
    }
    const key = '-----BEGIN KEY-----\r\n\tline\n-----END KEY-----\n';
    assert.deepEqual(credentialsOfSecret('s', secret(TYPE, { sshPrivateKey: key })), {
      ok: true,
      credentials: { sshPrivateKey: key },
    });
  });

  it('normalises repository URLs like the AppProject does', () => {
    assert.equal(normalizeRepositoryUrl('https://GitHub.com/Org/Repo.git/'), 'https://github.com/org/repo');
    assert.equal(normalizeRepositoryUrl('git@github.com:org/repo.git'), 'git@github.com:org/repo');
  });
});
