import assert from 'node:assert/strict';
import { ConfigError } from '@gitops/shared';
import { describe, it } from 'vitest';
import { loadRhoasOperatorConfig, oauthTokenUrl } from './config.ts';

describe('the RHOAS operator configuration', () => {
  it("uses the original operator's variable names and defaults", () => {
    const config = loadRhoasOperatorConfig({});
    assert.equal(config.apiUrl, 'https://api.openshift.com');
    assert.equal(config.ssoUrl, 'https://sso.redhat.com/auth/realms/redhat-external');
    assert.equal(
      oauthTokenUrl(config),
      'https://identity.api.openshift.com/auth/realms/rhoas/protocol/openid-connect/token',
    );
    assert.equal(config.requestTimeoutMs, 30_000);
    assert.equal(config.watchNamespace, undefined);
  });

  it('reads CLOUD_SERVICES_API, CLOUD_SERVICES_SSO, MAS_AUTH_URL and MAS_AUTH_REALM', () => {
    const config = loadRhoasOperatorConfig({
      CLOUD_SERVICES_API: 'http://127.0.0.1:9000',
      CLOUD_SERVICES_SSO: 'http://127.0.0.1:9000/auth/realms/x',
      MAS_AUTH_URL: 'http://127.0.0.1:9000/auth/',
      MAS_AUTH_REALM: 'local',
    });
    assert.equal(config.apiUrl, 'http://127.0.0.1:9000');
    assert.equal(config.ssoUrl, 'http://127.0.0.1:9000/auth/realms/x');
    assert.equal(
      oauthTokenUrl(config),
      'http://127.0.0.1:9000/auth/realms/local/protocol/openid-connect/token',
    );
  });

  it('reports every bad variable at once', () => {
    assert.throws(
      () =>
        loadRhoasOperatorConfig({
          CLOUD_SERVICES_API: 'ftp://x',
          MAS_AUTH_REALM: 'a/b',
          RHOAS_RETRY_MAX: '2h',
        }),
      (err: unknown) =>
        err instanceof ConfigError &&
        /CLOUD_SERVICES_API must be a URL with scheme http or https/.test(err.message) &&
        /MAS_AUTH_REALM must match/.test(err.message) &&
        /RHOAS_RETRY_MAX must be between 100ms and 1h/.test(err.message),
    );
  });
});
