import assert from 'node:assert/strict';
import { DeploymentTargetAnnotation, Provisioner } from '@gitops/api';
import { createMetricsRegistry, type KubeObject } from '@gitops/shared';
import { describe, test } from 'vitest';
import type { TargetCr } from '../target-matching.ts';
import {
  jwtExpiry,
  registerProvisionedTokenExpiry,
  tokenOfKubeconfigSecret,
  tokenTimesProblem,
} from './namespace-token.ts';

const jwt = (payload: object) =>
  ['{"alg":"none"}', JSON.stringify(payload), ''].map((p) => Buffer.from(p).toString('base64url')).join('.');

const target = (name: string, provisionedBy: string): TargetCr => ({
  apiVersion: 'appstudio.redhat.com/v1alpha1',
  kind: 'DeploymentTarget',
  metadata: {
    name,
    namespace: 'team-a',
    annotations: { [DeploymentTargetAnnotation.ProvisionedBy]: provisionedBy },
  },
  spec: {
    deploymentTargetClassName: 'isolation-level-namespace',
    kubernetesCredentials: {
      clusterCredentialsSecret: `${name}-kubeconfig`,
      apiURL: 'https://api.example.test:6443',
      defaultNamespace: name,
      allowInsecureSkipTLSVerify: false,
    },
  },
});

const kubeconfigSecret = (name: string, token: string): KubeObject =>
  ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: 'team-a' },
    data: {
      kubeconfig: Buffer.from(
        JSON.stringify({ users: [{ name: 'gitops-deployer', user: { token } }] }),
      ).toString('base64'),
    },
  }) as KubeObject;

describe('token expiry of namespace-provisioned targets', () => {
  test('jwtExpiry reads exp, and nothing from what is no JWT', () => {
    assert.equal(jwtExpiry(jwt({ exp: 1_900_000_000 })), 1_900_000_000);
    assert.equal(jwtExpiry(jwt({ sub: 'x' })), undefined);
    assert.equal(jwtExpiry('opaque-token'), undefined);
  });

  test('one series per target this provisioner made, from the cached Secret, at scrape time', async () => {
    const registry = createMetricsRegistry({ defaultMetrics: false });
    const targets = [target('mine', Provisioner.Namespace), target('other', 'someone-else')];
    const secrets = new Map([
      ['mine-kubeconfig', kubeconfigSecret('mine-kubeconfig', jwt({ exp: 1_900_000_000 }))],
      ['other-kubeconfig', kubeconfigSecret('other-kubeconfig', jwt({ exp: 1_800_000_000 }))],
    ]);
    registerProvisionedTokenExpiry(registry, {
      targets: { list: () => targets },
      secrets: { get: (_namespace, name) => secrets.get(name) },
    });
    const lines = (await registry.metrics())
      .split('\n')
      .filter((l) => l.startsWith('gitops_namespace_provisioner_token_expiry_timestamp_seconds{'));
    assert.deepEqual(lines, [
      'gitops_namespace_provisioner_token_expiry_timestamp_seconds{deployment_target_namespace="team-a",deployment_target="mine"} 1900000000',
    ]);
    secrets.delete('mine-kubeconfig');
    assert.doesNotMatch(await registry.metrics(), /deployment_target="mine"/);
  });

  test('tokenOfKubeconfigSecret reads the token of the kubeconfig, and nothing from what is none', () => {
    assert.equal(tokenOfKubeconfigSecret(kubeconfigSecret('s', 'the-token')), 'the-token');
    assert.equal(tokenOfKubeconfigSecret(undefined), undefined);
    const garbage = {
      ...kubeconfigSecret('s', 'x'),
      data: { kubeconfig: Buffer.from('{').toString('base64') },
    };
    assert.equal(tokenOfKubeconfigSecret(garbage as KubeObject), undefined);
  });

  test('token times: the renew window must be shorter than the lifetime, the lifetime 10 minutes at least', () => {
    const hour = 3_600_000;
    assert.equal(tokenTimesProblem({}), undefined);
    assert.equal(tokenTimesProblem({ tokenLifetimeMs: 2 * hour, tokenRenewBeforeMs: hour }), undefined);
    assert.match(
      tokenTimesProblem({ tokenLifetimeMs: hour, tokenRenewBeforeMs: hour }) ?? '',
      /GITOPS_NAMESPACE_PROVISIONER_TOKEN_RENEW_BEFORE \(1h\) must be shorter than GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME \(1h\)/,
    );
    assert.match(tokenTimesProblem({ tokenLifetimeMs: 60_000 }) ?? '', /at least 10m/);
  });
});
