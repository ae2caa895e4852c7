import assert from 'node:assert/strict';
import { KubeApiError, type KubeObject } from '@gitops/shared';
import { describe, it } from 'vitest';
import {
  classifyConnectionError,
  type ManagedEnvironmentSpec,
  parseManagedEnvironmentSpec,
  readTargetCluster,
} from './connection.check.ts';

const spec: ManagedEnvironmentSpec = {
  apiURL: 'https://API.example.com:6443',
  credentialsSecret: 's',
  allowInsecureSkipTLSVerify: false,
  createNewServiceAccount: false,
  namespaces: [],
  clusterResources: false,
};

function secret(
  kubeconfig: string | undefined,
  type = 'managed-gitops.redhat.com/managed-environment',
): KubeObject {
  return {
    metadata: { name: 's', namespace: 'n' },
    type,
    data: kubeconfig === undefined ? {} : { kubeconfig: Buffer.from(kubeconfig).toString('base64') },
  } as KubeObject;
}

const kubeconfig = (server: string, user: Record<string, unknown> = { token: 'secret-token' }) =>
  JSON.stringify({
    clusters: [{ name: 'c', cluster: { server } }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'elsewhere',
  });

describe('ManagedEnvironment connection checks', () => {
  it('tells a kubeconfig without clusters (UnableToLocateContext) from text that is no kubeconfig (UnableToParseKubeconfigData)', () => {
    const empty = readTargetCluster(
      secret('apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n'),
      spec,
    );
    assert.deepEqual(empty, {
      ok: false,
      reason: 'UnableToLocateContext',
      message:
        "the kubeconfig did not have a cluster entry that matched the API URL 'https://API.example.com:6443'",
    });
    const cases: [string, string][] = [
      [
        'badbadbad',
        'unable to parse the kubeconfig data in the Secret: it is not a valid kubeconfig (the document is a string, not a mapping)',
      ],
      [
        '- a\n- b\n',
        'unable to parse the kubeconfig data in the Secret: it is not a valid kubeconfig (the document is a list, not a mapping)',
      ],
      [
        'users: [{name: u, user: {token: secret-token}}]\nclusters: [',
        'unable to parse the kubeconfig data in the Secret: it is not a valid kubeconfig (YAML error BAD_INDENT at line 2, column 12)',
      ],
    ];
    for (const [text, message] of cases) {
      assert.deepEqual(readTargetCluster(secret(text), spec), {
        ok: false,
        reason: 'UnableToParseKubeconfigData',
        message,
      });
    }
  });

  it('accepts an https apiURL and rejects anything else or one with a query', () => {
    assert.equal(parseManagedEnvironmentSpec({ ...spec }).ok, true);
    for (const apiURL of ['http://x:6443', 'https://x:6443?a=b', 'not a url']) {
      const parsed = parseManagedEnvironmentSpec({ ...spec, apiURL });
      assert.equal(parsed.ok, false);
      if (!parsed.ok) assert.equal(parsed.reason, 'UnsupportedAPIURL');
    }
  });

  it('reads a spec without allowInsecureSkipTLSVerify (optional, default false) as verifying TLS', () => {
    const { allowInsecureSkipTLSVerify: _omitted, ...withoutField } = spec;
    const parsed = parseManagedEnvironmentSpec(withoutField);
    assert.equal(parsed.ok && parsed.value.allowInsecureSkipTLSVerify, false);
    const insecure = parseManagedEnvironmentSpec({ ...spec, allowInsecureSkipTLSVerify: true });
    assert.equal(insecure.ok && insecure.value.allowInsecureSkipTLSVerify, true);
  });

  it('rejects namespaces that are not DNS-1123 labels', () => {
    const parsed = parseManagedEnvironmentSpec({ ...spec, namespaces: ['ok', 'Not_OK'] });
    assert.equal(parsed.ok, false);
    if (!parsed.ok) assert.equal(parsed.reason, 'InvalidNamespaceList');
  });

  it('reports each Secret problem with its reason and message', () => {
    const cases: [KubeObject | undefined, string, string | RegExp][] = [
      [undefined, 'SecretNotFound', /'s'.*not found/],
      [secret(kubeconfig(spec.apiURL), 'Opaque'), 'InvalidSecretType', 'invalid secret type: Opaque'],
      [secret(undefined), 'MissingKubeConfigField', 'missing kubeconfig field in Secret'],
      [secret('garbage: ['), 'UnableToParseKubeconfigData', /not a valid kubeconfig/],
      [
        secret(kubeconfig('https://other:6443')),
        'UnableToLocateContext',
        "the kubeconfig did not have a cluster entry that matched the API URL 'https://API.example.com:6443'",
      ],
      [
        secret(kubeconfig(spec.apiURL, { 'client-certificate-data': 'eA==', 'client-key-data': 'eA==' })),
        'UnableToCreateClient',
        /client certificate, which is not supported/,
      ],
    ];
    for (const [input, reason, message] of cases) {
      const outcome = readTargetCluster(input, spec);
      assert.equal(outcome.ok, false);
      if (outcome.ok) continue;
      assert.equal(outcome.reason, reason);
      if (typeof message === 'string') assert.equal(outcome.message, message);
      else assert.match(outcome.message, message);
      assert.doesNotMatch(outcome.message, /secret-token/);
    }
  });

  it('reports a bearer token that cannot be sent in a header by user name, never quoting it', () => {
    for (const token of ['secret-token\nline', 'secret-token\u0000nul', 'secret token', 'secret-tökén']) {
      const outcome = readTargetCluster(secret(kubeconfig(spec.apiURL, { token })), spec);
      assert.equal(outcome.ok, false);
      if (outcome.ok) continue;
      assert.equal(outcome.reason, 'UnableToCreateClient');
      assert.equal(
        outcome.message,
        "the bearer token of kubeconfig user 'u' contains characters that cannot be sent in an HTTP header (control characters, spaces or non-ASCII)",
      );
    }
  });

  it('never quotes a header value that fetch refused in a connection error', () => {
    const refused = new TypeError('Headers.append: "Bearer secret-token\nx" is an invalid header value.');
    const err = new KubeApiError(
      { statusCode: 0, method: 'GET', path: '/api', message: 'GET /api: fetch failed' },
      { cause: refused },
    );
    const { message } = classifyConnectionError(err, spec.apiURL);
    assert.doesNotMatch(message, /secret-token/);
    assert.match(message, /is an invalid header value/);
  });

  it('matches the cluster case-insensitively and ignores current-context', () => {
    const outcome = readTargetCluster(secret(kubeconfig('https://api.example.com:6443')), spec);
    assert.equal(outcome.ok, true);
    if (outcome.ok) assert.equal(outcome.value.token, 'secret-token');
  });

  it('maps 401, 403, TLS and network failures to the documented reasons', () => {
    const api = (statusCode: number, message = 'x') =>
      new KubeApiError({ statusCode, method: 'GET', path: '/api/v1/namespaces', message });
    assert.match(classifyConnectionError(api(401), 'https://a').message, /401.*verify the API URL/);
    assert.equal(
      classifyConnectionError(api(403), 'https://a').message,
      'Provided service account does not have permission to access resources in the cluster. Verify that the service account has the correct Role and RoleBinding.',
    );
    const tls = classifyConnectionError(
      api(0, 'GET /api: self-signed certificate in certificate chain'),
      'https://a',
    );
    assert.equal(tls.reason, 'UnableToValidateClusterCredentials');
    assert.match(tls.message, /\.spec\.allowInsecureSkipTLSVerify/);
    const dns = classifyConnectionError(api(0, 'GET /api: getaddrinfo ENOTFOUND x.invalid'), 'https://a');
    assert.equal(dns.reason, 'UnableToCreateClient');
    assert.match(dns.message, /ENOTFOUND/);
  });
});
