import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ConfigError } from '@gitops/shared';
import { test } from 'vitest';
import { loadBackendConfig, parseEncryptionKeys, shardSelector } from './config.ts';

const key = () => randomBytes(32).toString('base64');
const required = {
  DATABASE_URL: 'postgres://u:p@localhost:5432/gitops',
  GITOPS_ENCRYPTION_KEYS: `k1=${key()}`,
};

test('DATABASE_SESSION_ADDRESS: unset by default, host:port when set', () => {
  assert.equal(loadBackendConfig(required).databaseSessionAddress, undefined);
  assert.deepEqual(
    loadBackendConfig({ ...required, DATABASE_SESSION_ADDRESS: 'postgres.db.svc:5432' })
      .databaseSessionAddress,
    { host: 'postgres.db.svc', port: 5432 },
  );
  assert.throws(
    () => loadBackendConfig({ ...required, DATABASE_SESSION_ADDRESS: 'postgres://postgres.db.svc:5432' }),
    ConfigError,
  );
});

test('defaults follow the contract', () => {
  const config = loadBackendConfig(required);
  assert.equal(config.argoCdNamespace, 'gitops-service-argocd');
  assert.equal(config.engineInstanceName, 'default');
  assert.equal(config.httpPort, 8080);
  assert.equal(config.logLevel, 'info');
  assert.equal(config.resyncIntervalMs, 600_000);
  assert.equal(config.relayEnabled, true);
  assert.equal(config.encryptionKeys.activeKeyId, 'k1');
});

test('GITOPS_RELAY_ENABLED=false disables the relay; RESYNC_INTERVAL is a duration', () => {
  const config = loadBackendConfig({ ...required, GITOPS_RELAY_ENABLED: 'false', RESYNC_INTERVAL: '30s' });
  assert.equal(config.relayEnabled, false);
  assert.equal(config.resyncIntervalMs, 30_000);
});

test('encryption keys: the first is active; bad keys are reported without their value', () => {
  const result = parseEncryptionKeys(`new=${key()},old=${key()}`);
  assert.ok('value' in result);
  assert.equal(result.value.activeKeyId, 'new');
  assert.deepEqual(
    result.value.keys.map((k) => k.id),
    ['new', 'old'],
  );
  const secret = Buffer.from('sixteen byte key').toString('base64');
  try {
    loadBackendConfig({ ...required, GITOPS_ENCRYPTION_KEYS: `k=${secret}` });
    assert.fail('expected a ConfigError');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    assert.match(err.message, /GITOPS_ENCRYPTION_KEYS/);
    assert.ok(!err.message.includes(secret));
  }
  assert.ok('error' in parseEncryptionKeys(`a=${key()},a=${key()}`));
  assert.ok('error' in parseEncryptionKeys('novalue'));
});

test('GITOPS_BACKEND_SHARD picks the labelled GitOpsDeployments; unset serves the unlabelled ones', () => {
  assert.equal(
    shardSelector(loadBackendConfig(required).backendShard),
    '!managed-gitops.redhat.com/backend-shard',
  );
  assert.equal(
    shardSelector(loadBackendConfig({ ...required, GITOPS_BACKEND_SHARD: 'a1' }).backendShard),
    'managed-gitops.redhat.com/backend-shard=a1',
  );
  assert.throws(() => loadBackendConfig({ ...required, GITOPS_BACKEND_SHARD: 'a b' }), ConfigError);
});

test('GITOPS_APPSTUDIO runs the App Studio controllers by default; GITOPS_PROMOTION_TIMEOUT is bounded', () => {
  assert.equal(loadBackendConfig(required).appStudioEnabled, true);
  assert.equal(loadBackendConfig({ ...required, GITOPS_APPSTUDIO: 'false' }).appStudioEnabled, false);
  assert.equal(loadBackendConfig(required).promotionTimeoutMs, 600_000);
  assert.equal(
    loadBackendConfig({ ...required, GITOPS_PROMOTION_TIMEOUT: '30s' }).promotionTimeoutMs,
    30_000,
  );
  assert.throws(() => loadBackendConfig({ ...required, GITOPS_PROMOTION_TIMEOUT: '1s' }), ConfigError);
  assert.throws(() => loadBackendConfig({ ...required, GITOPS_APPSTUDIO: 'maybe' }), ConfigError);
});

test('the GitOps repository render: git commands may take 2 minutes by default (bounded); known hosts are a file, unset by default', () => {
  const config = loadBackendConfig(required);
  assert.equal(config.renderGitTimeoutMs, 120_000);
  assert.equal(config.sshKnownHostsFile, '');
  assert.equal(
    loadBackendConfig({ ...required, GITOPS_RENDER_GIT_TIMEOUT: '5m' }).renderGitTimeoutMs,
    300_000,
  );
  assert.throws(() => loadBackendConfig({ ...required, GITOPS_RENDER_GIT_TIMEOUT: '1s' }), ConfigError);
  assert.equal(
    loadBackendConfig({ ...required, GITOPS_SSH_KNOWN_HOSTS_FILE: '/etc/gitops/ssh_known_hosts' })
      .sshKnownHostsFile,
    '/etc/gitops/ssh_known_hosts',
  );
  assert.throws(
    () => loadBackendConfig({ ...required, GITOPS_SSH_KNOWN_HOSTS_FILE: '/etc/x\nStrictHostKeyChecking=no' }),
    ConfigError,
  );
});

test('namespace provisioner tokens: a year, renewed 30 days before expiry, looked at hourly; the window must be shorter than the lifetime', () => {
  const config = loadBackendConfig(required);
  assert.equal(config.namespaceProvisionerTokenLifetimeMs, 8760 * 3_600_000);
  assert.equal(config.namespaceProvisionerTokenRenewBeforeMs, 720 * 3_600_000);
  assert.equal(config.namespaceProvisionerTokenCheckIntervalMs, 3_600_000);
  const short = loadBackendConfig({
    ...required,
    GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME: '24h',
    GITOPS_NAMESPACE_PROVISIONER_TOKEN_RENEW_BEFORE: '6h',
    GITOPS_NAMESPACE_PROVISIONER_TOKEN_CHECK_INTERVAL: '10m',
  });
  assert.equal(short.namespaceProvisionerTokenLifetimeMs, 24 * 3_600_000);
  assert.equal(short.namespaceProvisionerTokenRenewBeforeMs, 6 * 3_600_000);
  assert.equal(short.namespaceProvisionerTokenCheckIntervalMs, 600_000);
  assert.throws(
    () => loadBackendConfig({ ...required, GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME: '720h' }),
    (err: unknown) =>
      err instanceof ConfigError &&
      err.message.includes(
        'GITOPS_NAMESPACE_PROVISIONER_TOKEN_RENEW_BEFORE (720h) must be shorter than GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME (720h)',
      ),
  );
  // A TokenRequest asks for 10 minutes at least.
  assert.throws(
    () => loadBackendConfig({ ...required, GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME: '5m' }),
    ConfigError,
  );
});
