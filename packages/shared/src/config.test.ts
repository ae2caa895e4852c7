import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import {
  boolVar,
  commonConfig,
  databaseSessionAddressVar,
  databaseUrlVar,
  durationVar,
  enumVar,
  formatDuration,
  intVar,
  loadConfig,
  optionalStringVar,
  parseDatabaseAddress,
  parseDuration,
  urlVar,
} from './config.ts';
import { ConfigError, ErrorCode, isTerminalError } from './errors.ts';

const schema = {
  resyncSeconds: intVar('GITOPS_RESYNC_SECONDS', { default: 600, min: 30, max: 86400 }),
  requestTimeoutMs: durationVar('GITOPS_REQUEST_TIMEOUT', { default: '30s', min: '1s', max: '5m' }),
  dryRun: boolVar('GITOPS_DRY_RUN', { default: false }),
  mode: enumVar('GITOPS_MODE', ['a', 'b'], { default: 'a' }),
  argoUrl: urlVar('ARGO_URL', { default: 'https://argocd.example', protocols: ['https:'] }),
  kubeconfigPath: optionalStringVar('KUBECONFIG'),
};

function configErrorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected a ConfigError');
}

describe('loadConfig', () => {
  it('uses the defaults when nothing is set', () => {
    const config = loadConfig(schema, {});
    assert.deepEqual(
      { ...config },
      {
        resyncSeconds: 600,
        requestTimeoutMs: 30_000,
        dryRun: false,
        mode: 'a',
        argoUrl: 'https://argocd.example',
        kubeconfigPath: undefined,
      },
    );
    assert.ok(Object.isFrozen(config));
  });

  it('treats an empty value as unset', () => {
    assert.equal(loadConfig(schema, { GITOPS_RESYNC_SECONDS: '' }).resyncSeconds, 600);
  });

  it('parses set values', () => {
    const config = loadConfig(schema, {
      GITOPS_RESYNC_SECONDS: '30',
      GITOPS_REQUEST_TIMEOUT: '1m30s',
      GITOPS_DRY_RUN: 'YES',
      GITOPS_MODE: 'b',
      ARGO_URL: 'https://argo.internal:8443/',
      KUBECONFIG: '/tmp/kc',
    });
    assert.equal(config.resyncSeconds, 30);
    assert.equal(config.requestTimeoutMs, 90_000);
    assert.equal(config.dryRun, true);
    assert.equal(config.mode, 'b');
    assert.equal(config.argoUrl, 'https://argo.internal:8443/');
    assert.equal(config.kubeconfigPath, '/tmp/kc');
  });

  it('names the variable, the bounds and the value in the error', () => {
    const err = configErrorOf(() => loadConfig(schema, { GITOPS_RESYNC_SECONDS: '5' }));
    assert.deepEqual(err.issues, [
      {
        name: 'GITOPS_RESYNC_SECONDS',
        message: 'GITOPS_RESYNC_SECONDS must be between 30 and 86400 (got "5")',
      },
    ]);
    assert.match(err.message, /GITOPS_RESYNC_SECONDS must be between 30 and 86400 \(got "5"\)/);
    assert.equal(err.code, ErrorCode.configInvalid);
    assert.ok(isTerminalError(err));
  });

  it('lists every bad variable at once', () => {
    const err = configErrorOf(() =>
      loadConfig(schema, {
        GITOPS_RESYNC_SECONDS: '1.5',
        GITOPS_REQUEST_TIMEOUT: '10',
        GITOPS_DRY_RUN: 'maybe',
        GITOPS_MODE: 'c',
        ARGO_URL: 'http://argocd.example',
      }),
    );
    assert.deepEqual(
      err.issues.map((issue) => issue.message),
      [
        'GITOPS_RESYNC_SECONDS must be an integer between 30 and 86400 (got "1.5")',
        'GITOPS_REQUEST_TIMEOUT must be a duration like 500ms, 30s, 5m or 1h between 1s and 5m (got "10")',
        'GITOPS_DRY_RUN must be true or false (got "maybe")',
        'GITOPS_MODE must be one of a, b (got "c")',
        'ARGO_URL must be a URL with scheme https (got "http://argocd.example")',
      ],
    );
  });

  it('rejects durations out of bounds', () => {
    const err = configErrorOf(() => loadConfig(schema, { GITOPS_REQUEST_TIMEOUT: '10m' }));
    assert.equal(err.issues[0]?.message, 'GITOPS_REQUEST_TIMEOUT must be between 1s and 5m (got "10m")');
  });

  it('requires DATABASE_URL and never echoes its value', () => {
    const missing = configErrorOf(() => loadConfig({ databaseUrl: databaseUrlVar }, {}));
    assert.equal(missing.issues[0]?.message, 'DATABASE_URL is required');

    const wrong = configErrorOf(() =>
      loadConfig({ databaseUrl: databaseUrlVar }, { DATABASE_URL: 'mysql://u:hunter2@db/x' }),
    );
    assert.equal(
      wrong.issues[0]?.message,
      'DATABASE_URL must be a URL with scheme postgres or postgresql (got a value, not shown)',
    );
    assert.doesNotMatch(wrong.message, /hunter2/);

    const ok = loadConfig({ databaseUrl: databaseUrlVar }, { DATABASE_URL: 'postgres://u:p@db:5432/gitops' });
    assert.equal(ok.databaseUrl, 'postgres://u:p@db:5432/gitops');
  });

  it('reads DATABASE_SESSION_ADDRESS as host:port, unset when empty', () => {
    const load = (value?: string) =>
      loadConfig({ sessionAddress: databaseSessionAddressVar }, { DATABASE_SESSION_ADDRESS: value })
        .sessionAddress;
    assert.equal(load(), undefined);
    assert.equal(load(''), undefined);
    assert.deepEqual(load('postgres.db.svc:5432'), { host: 'postgres.db.svc', port: 5432 });
    assert.deepEqual(load(' 10.0.0.7:5433 '), { host: '10.0.0.7', port: 5433 });
    assert.deepEqual(load('[fd00::7]:5432'), { host: 'fd00::7', port: 5432 });
    const err = configErrorOf(() =>
      loadConfig({ sessionAddress: databaseSessionAddressVar }, { DATABASE_SESSION_ADDRESS: 'postgres' }),
    );
    assert.equal(
      err.issues[0]?.message,
      'DATABASE_SESSION_ADDRESS must be host:port of PostgreSQL, e.g. postgres.db.svc:5432 or [fd00::7]:5432 (got "postgres")',
    );
  });

  it('refuses anything but host:port as a database address', () => {
    for (const text of [
      'postgres',
      'postgres:',
      'postgres:0',
      'postgres:65536',
      'fd00::7:5432',
      '[10.0.0.7]:5432',
      'postgres://db:5432',
      'user@db:5432',
      'db:5432/gitops',
      '-db:5432',
    ]) {
      assert.equal(parseDatabaseAddress(text), undefined, text);
    }
    assert.deepEqual(parseDatabaseAddress('db:65535'), { host: 'db', port: 65535 });
  });

  it('composes the common fields', () => {
    const config = loadConfig(
      { ...commonConfig, databaseUrl: databaseUrlVar },
      { DATABASE_URL: 'postgres://db/x' },
    );
    assert.equal(config.logLevel, 'info');
    assert.equal(config.httpPort, 8080);
    assert.equal(config.kubeconfigPath, undefined);
    assert.equal(config.shutdownTimeoutMs, 25_000);
    const err = configErrorOf(() =>
      loadConfig(commonConfig, { LOG_LEVEL: 'loud', HTTP_PORT: '70000', GITOPS_RESYNC_SECONDS: '5' }),
    );
    assert.deepEqual(
      err.issues.map((issue) => issue.name),
      ['LOG_LEVEL', 'HTTP_PORT', 'GITOPS_RESYNC_SECONDS'],
    );
  });
});

describe('durations', () => {
  it('parses Go-style durations into milliseconds', () => {
    assert.equal(parseDuration('250ms'), 250);
    assert.equal(parseDuration('30s'), 30_000);
    assert.equal(parseDuration('1h30m'), 5_400_000);
    assert.equal(parseDuration('1.5s'), 1_500);
    assert.equal(parseDuration('10'), undefined);
    assert.equal(parseDuration('10 s'), undefined);
    assert.equal(parseDuration(''), undefined);
  });

  it('formats milliseconds back', () => {
    assert.equal(formatDuration(90_000), '1m30s');
    assert.equal(formatDuration(5), '5ms');
    assert.equal(formatDuration(0), '0s');
  });
});
