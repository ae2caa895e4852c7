import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'vitest';
import { createLogger, createMemoryDestination, REDACTED, redactSecrets, scrubString } from './logger.ts';

// Every value below must never appear in a log line.
const secrets = {
  password: 'pw-1-hunter2',
  token: 'tok-2-abcdef',
  bearerToken: 'tok-3-eyJhbGciOi',
  sshPrivateKey:
    '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n-----END OPENSSH PRIVATE KEY-----',
  kubeconfig: 'apiVersion: v1\nusers:\n- user: {token: kc-4-secret}',
  authorization: 'Bearer tok-5-header',
  secretData: 'c2VjcmV0LTYtZGF0YQ==',
  secretStringData: 'plain-7-stringdata',
  dbPassword: 'db-8-pass',
  gitPassword: 'git-9-pass',
  clientSecret: 'oidc-10-secret',
  msgPassword: 'msg-11-pass',
  errPassword: 'err-12-pass',
  childToken: 'child-13-token',
  keywordPassword: 'kw-14-pass',
};

function logAllTheThings() {
  const destination = createMemoryDestination();
  const logger = createLogger({ name: 'test', level: 'trace', destination });
  logger.info(
    {
      repo: { url: 'https://github.com/org/repo', password: secrets.password, username: 'git' },
      cluster: { name: 'prod', bearerToken: secrets.bearerToken, token: secrets.token },
      credentials: [{ sshPrivateKey: secrets.sshPrivateKey }],
      kubeconfig: secrets.kubeconfig,
      headers: { Authorization: secrets.authorization, 'content-type': 'application/json' },
      object: {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'repo-creds', namespace: 'jane' },
        data: { password: secrets.secretData },
        stringData: { url: secrets.secretStringData },
      },
      DATABASE_URL: `postgres://gitops:${secrets.dbPassword}@db:5432/gitops`,
      gitPassword: secrets.gitPassword,
      oidc: { client_secret: secrets.clientSecret },
      dsn: `host=db user=gitops password=${secrets.keywordPassword} dbname=gitops`,
    },
    'reconciled',
  );
  logger.warn(`connecting to postgresql://gitops:${secrets.msgPassword}@db/gitops failed`);
  const err = Object.assign(new Error(`connect postgres://u:${secrets.errPassword}@db failed`), {
    request: { headers: { authorization: secrets.authorization } },
  });
  logger.error(err);
  logger.error({ err }, 'with message');
  logger.child({ token: secrets.childToken, controller: 'x' }).info('child');
  return destination;
}

describe('createLogger', () => {
  it('never writes secret values, whatever field they hide in', () => {
    const output = logAllTheThings().text();
    for (const [field, value] of Object.entries(secrets)) {
      for (const fragment of value.split('\n')) {
        assert.ok(!output.includes(fragment), `secret from ${field} leaked: ${fragment}`);
      }
    }
  });

  it('keeps the rest of the log useful', () => {
    const lines = logAllTheThings().lines;
    assert.equal(lines.length, 5);
    // biome-ignore lint/suspicious/noExplicitAny: log lines are free-form JSON
    const [info, warn, errorLine, errorWithMessage, child] = lines as [any, any, any, any, any];
    assert.equal(info.msg, 'reconciled');
    assert.equal(info.name, 'test');
    assert.deepEqual(info.repo, { url: 'https://github.com/org/repo', password: REDACTED, username: 'git' });
    assert.deepEqual(info.object.metadata, { name: 'repo-creds', namespace: 'jane' });
    assert.equal(info.object.data, REDACTED);
    assert.equal(info.DATABASE_URL, REDACTED);
    assert.equal(info.headers['content-type'], 'application/json');
    assert.equal(warn.msg, `connecting to postgresql://gitops:${REDACTED}@db/gitops failed`);
    assert.equal(errorLine.msg, `connect postgres://u:${REDACTED}@db failed`);
    assert.equal(errorLine.err.type, 'Error');
    assert.match(String(errorWithMessage.err.stack), /logger\.test\.ts/);
    assert.equal(child.controller, 'x');
    assert.equal(child.token, REDACTED);
  });
});

describe('redactSecrets', () => {
  it('cuts cycles and leaves non-secret values alone', () => {
    const object: Record<string, unknown> = { name: 'a', count: 3, nested: { ok: true } };
    object.self = object;
    assert.deepEqual(redactSecrets(object), {
      name: 'a',
      count: 3,
      nested: { ok: true },
      self: '[Circular]',
    });
  });

  it('does not treat names of secrets as secrets', () => {
    assert.deepEqual(redactSecrets({ secretName: 'repo-creds', kubeconfigPath: '/etc/kc', tokenCount: 2 }), {
      secretName: 'repo-creds',
      kubeconfigPath: '/etc/kc',
      tokenCount: 2,
    });
  });
});

describe('scrubString', () => {
  it('removes passwords from connection strings and tokens from headers', () => {
    assert.equal(scrubString('postgres://u:p%40ss@h:5432/db'), `postgres://u:${REDACTED}@h:5432/db`);
    assert.equal(scrubString("password='a b' host=x"), `password=${REDACTED} host=x`);
    assert.equal(scrubString('Authorization: Bearer abc.def'), `Authorization: Bearer ${REDACTED}`);
    assert.equal(scrubString('https://example.com/path'), 'https://example.com/path');
  });

  it("removes the value Node's argument checks quote, from the message and the stack", () => {
    let thrown: unknown;
    try {
      execFileSync('true', [], { env: { GIT_PASSWORD: 'pass\u0000word-15-binary' } });
    } catch (err) {
      thrown = err;
    }
    assert.ok(thrown instanceof Error && thrown.message.includes('word-15-binary'), 'Node quotes the value');
    const destination = createMemoryDestination();
    const logger = createLogger({ name: 'test', destination });
    logger.error({ err: thrown }, 'reconcile failed');
    logger.error(thrown);
    logger.warn(`validation failed: ${(thrown as Error).message}`);
    assert.ok(!destination.text().includes('word-15-binary'), destination.text());
    assert.ok(destination.text().includes(`Received ${REDACTED}`));
    assert.equal(
      scrubString('GET /api: Headers.append: "Bearer tok\n"en" is an invalid header value.'),
      `GET /api: Headers.append: ${REDACTED} is an invalid header value.`,
    );
    assert.equal(
      scrubString("The argument 'args[0]' must be a string without null bytes. Received 'a\\x00b'"),
      `The argument 'args[0]' must be a string without null bytes. Received ${REDACTED}`,
    );
  });
});
