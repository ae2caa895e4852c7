import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ConfigError } from '@gitops/shared';
import { describe, it } from 'vitest';
import { loadAgentConfig } from './config.ts';

const key = randomBytes(32).toString('base64');
const required = { DATABASE_URL: 'postgres://u:secretpw@localhost/db', GITOPS_ENCRYPTION_KEYS: `k1=${key}` };

describe('loadAgentConfig', () => {
  it('has the contract defaults', () => {
    const config = loadAgentConfig(required);
    assert.equal(config.argoCdNamespace, 'gitops-service-argocd');
    assert.equal(config.engineInstanceName, 'default');
    assert.equal(config.httpPort, 8081);
    assert.equal(config.resyncIntervalMs, 600_000);
    assert.equal(config.operationRetentionMs, 24 * 3_600_000);
    assert.equal(config.encryptionKeys?.activeKeyId, 'k1');
  });

  it('sends its sessions to DATABASE_SESSION_ADDRESS when set (host:port), else to DATABASE_URL', () => {
    assert.equal(loadAgentConfig(required).databaseSessionAddress, undefined);
    assert.deepEqual(
      loadAgentConfig({ ...required, DATABASE_SESSION_ADDRESS: '[fd00::7]:5432' }).databaseSessionAddress,
      {
        host: 'fd00::7',
        port: 5432,
      },
    );
  });

  it('needs no GITOPS_ENCRYPTION_KEYS: an agent with its own role opens credentials with its instance key', () => {
    const config = loadAgentConfig({ DATABASE_URL: required.DATABASE_URL });
    assert.equal(config.encryptionKeys, undefined);
  });

  it('reports every bad variable and never echoes secrets', () => {
    try {
      loadAgentConfig({
        DATABASE_URL: 'mysql://u:secretpw@x/db',
        GITOPS_ENCRYPTION_KEYS: 'k1=c2hvcnQ=',
        ARGOCD_NAMESPACE: 'Not_A_Namespace',
        OPERATION_MAX_ATTEMPTS: '0',
      });
      assert.fail('expected a ConfigError');
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      assert.deepEqual(err.issues.map((i) => i.name).sort(), [
        'ARGOCD_NAMESPACE',
        'DATABASE_URL',
        'GITOPS_ENCRYPTION_KEYS',
        'OPERATION_MAX_ATTEMPTS',
      ]);
      assert.doesNotMatch(err.message, /secretpw|c2hvcnQ/);
    }
  });
});
