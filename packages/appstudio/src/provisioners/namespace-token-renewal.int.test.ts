/**
 * Renewal of the namespace provisioner's tokens (namespace-token-renewal.ts) against the real API server: a
 * token asked for 10 minutes is due for features started with a 2 h lifetime and a 110 min renew window; it
 * is replaced in its Secret in place by one that works, while a token not yet due, and a Secret of a
 * DeploymentTarget that only claims to be the provisioner's, are left alone; a round that cannot renew (the
 * ServiceAccount gone) fails without stopping anything and the next one succeeds.
 */
import assert from 'node:assert/strict';
import type { KubeObject } from '@gitops/shared';
import { HttpMethod, KubeConfig, kubeRequest } from '@gitops/shared';
import { eventually, randomSuffix } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type AppStudioFixture, createAppStudioFixture, Kind } from '../testing/appstudio-fixture.ts';
import { jwtExpiry, tokenOfKubeconfigSecret } from './namespace-token.ts';

const MINUTE = 60_000;
const statusOf = (o: KubeObject | undefined) => (o?.status ?? {}) as { phase?: string };
const kubeconfigOf = (secret: KubeObject | undefined) =>
  Buffer.from(String((secret?.data as Record<string, string> | undefined)?.kubeconfig), 'base64').toString();
const expOf = (secret: KubeObject | undefined) => jwtExpiry(tokenOfKubeconfigSecret(secret) ?? '');

describe('namespace provisioner token renewal', () => {
  const f: AppStudioFixture = createAppStudioFixture();
  let ns = '';
  const className = `test-namespace-renewal-${randomSuffix()}`;
  const extraNamespaces: string[] = [];

  const secretOf = (claim: string, namespace = ns) => f.get(Kind.Secret, namespace, `${claim}-dt-kubeconfig`);

  async function provisioned(claim: string): Promise<KubeObject> {
    await f.create(Kind.DeploymentTargetClaim, ns, claim, { spec: { deploymentTargetClassName: className } });
    await eventually(`${claim} Bound`, async () =>
      statusOf(await f.get(Kind.DeploymentTargetClaim, ns, claim)).phase === 'Bound' ? true : undefined,
    );
    extraNamespaces.push(`${ns}-${claim}`);
    const secret = await secretOf(claim);
    assert.ok(secret);
    return secret;
  }

  /** Who the API server takes the kubeconfig's user for. */
  async function whoAmI(kubeconfig: string): Promise<string | undefined> {
    const user = new KubeConfig();
    user.loadFromString(kubeconfig);
    const review = (await kubeRequest(user, {
      method: HttpMethod.POST,
      path: '/apis/authentication.k8s.io/v1/selfsubjectreviews',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
    })) as { status?: { userInfo?: { username?: string } } };
    return review.status?.userInfo?.username;
  }

  beforeAll(async () => {
    ns = await f.createNamespace('appstudio-nsrenew');
    await f.createClass(className, {
      provisioner: 'managed-gitops.redhat.com/namespace',
      reclaimPolicy: 'Delete',
    });
  });
  afterAll(async () => {
    await f.cleanup();
    // The forged claim and target may carry finalizers only the stopped features would remove.
    for (const kind of [Kind.DeploymentTargetClaim, Kind.DeploymentTarget])
      for (const o of await f.list(kind, `${ns}-due`).catch(() => []))
        await f.patch(kind, `${ns}-due`, o.metadata.name, { metadata: { finalizers: null } }).catch(() => {});
    for (const name of extraNamespaces)
      await kubeRequest(f.kc, { method: HttpMethod.DELETE, path: `/api/v1/namespaces/${name}` }).catch(
        () => {},
      );
  });

  it('renews a due token in place with one that works; a token not yet due and a forged target are left alone; a failed round is retried', async () => {
    // Provisioned by features that ask for 10 minutes (and would look again only in an hour).
    await f.start({
      namespaceProvisioner: {
        tokenLifetimeMs: 10 * MINUTE,
        tokenRenewBeforeMs: MINUTE,
        tokenCheckIntervalMs: 60 * MINUTE,
      },
    });
    const before = await provisioned('due-dtc');
    const expBefore = expOf(before);
    assert.ok(expBefore !== undefined);
    await f.stop();

    // A DeploymentTarget that claims to be the provisioner's, in a namespace whose claim `dtc` maps to the
    // same provisioned namespace (`<ns>-due` + `dtc`), with an unreadable (so due) kubeconfig Secret.
    const forgedNs = `${ns}-due`;
    extraNamespaces.push(forgedNs);
    await f.createNamespaceNamed(forgedNs);
    const forgedClaim = await f.create(Kind.DeploymentTargetClaim, forgedNs, 'dtc', {
      spec: { targetName: 'dtc-dt', deploymentTargetClassName: `${className}-none` },
    });
    const forgedSecret = await f.create(Kind.Secret, forgedNs, 'dtc-dt-kubeconfig', {
      type: 'managed-gitops.redhat.com/managed-environment',
      stringData: { kubeconfig: 'not a kubeconfig' },
    });
    const forgedTarget = await f.create(Kind.DeploymentTarget, forgedNs, 'dtc-dt', {
      metadata: {
        annotations: {
          'provisioner.appstudio.redhat.com/provisioned-by': 'managed-gitops.redhat.com/namespace',
        },
      },
      spec: {
        deploymentTargetClassName: `${className}-none`,
        claimRef: 'dtc',
        kubernetesCredentials: {
          apiURL: f.kc.getCurrentCluster()?.server,
          defaultNamespace: `${ns}-due-dtc`,
          clusterCredentialsSecret: 'dtc-dt-kubeconfig',
          allowInsecureSkipTLSVerify: false,
        },
      },
    });

    // Now a 2 h lifetime renewed within 110 min of expiry, looked at every 2 s: `due-dtc` (10 min) is due.
    const features = await f.start({
      namespaceProvisioner: {
        tokenLifetimeMs: 120 * MINUTE,
        tokenRenewBeforeMs: 110 * MINUTE,
        tokenCheckIntervalMs: 2_000,
      },
    });
    const fresh = await provisioned('fresh-dtc');
    const renewed = await eventually('the due token renewed', async () => {
      const secret = await secretOf('due-dtc');
      return tokenOfKubeconfigSecret(secret) !== tokenOfKubeconfigSecret(before) ? secret : undefined;
    });
    assert.equal(renewed.metadata.uid, before.metadata.uid, 'updated in place, not recreated');
    assert.equal(renewed.type, before.type);
    assert.deepEqual(renewed.metadata.labels, before.metadata.labels);
    const expAfter = expOf(renewed);
    assert.ok(expAfter !== undefined && expAfter > expBefore, 'the new token expires later');
    // The same kubeconfig but for the token.
    const shape = (text: string) => {
      const config = JSON.parse(text) as { users: { user: { token?: string } }[] };
      for (const u of config.users) delete u.user.token;
      return config;
    };
    assert.deepEqual(shape(kubeconfigOf(renewed)), shape(kubeconfigOf(before)));
    assert.equal(await whoAmI(kubeconfigOf(renewed)), `system:serviceaccount:${ns}-due-dtc:gitops-deployer`);

    // One more round once every cache holds the latest objects: nothing is due, the forged target is refused.
    for (const object of [renewed, fresh, forgedClaim, forgedSecret, forgedTarget])
      await f.settledAfter(object);
    const round = await features.namespaceTokens.renewDue();
    assert.deepEqual(round, { checked: 3, renewed: 0, failed: 0 });
    assert.equal((await secretOf('fresh-dtc'))?.metadata.resourceVersion, fresh.metadata.resourceVersion);
    assert.equal((await secretOf('due-dtc'))?.metadata.resourceVersion, renewed.metadata.resourceVersion);
    assert.equal(
      (await f.get(Kind.Secret, forgedNs, 'dtc-dt-kubeconfig'))?.metadata.resourceVersion,
      forgedSecret.metadata.resourceVersion,
    );

    // Unreadable and its ServiceAccount gone: the round fails (and the process goes on); once the
    // ServiceAccount is back, a later round renews it.
    const saPath = `/api/v1/namespaces/${ns}-fresh-dtc/serviceaccounts/gitops-deployer`;
    await kubeRequest(f.kc, { method: HttpMethod.DELETE, path: saPath });
    const broken = await f.patch(Kind.Secret, ns, 'fresh-dtc-dt-kubeconfig', {
      data: { kubeconfig: Buffer.from('{}').toString('base64') },
    });
    await f.settledAfter(broken);
    const failing = await features.namespaceTokens.renewDue();
    assert.deepEqual(failing, { checked: 3, renewed: 0, failed: 1 });
    assert.equal(tokenOfKubeconfigSecret(await secretOf('fresh-dtc')), undefined);
    await kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: `/api/v1/namespaces/${ns}-fresh-dtc/serviceaccounts`,
      body: { metadata: { name: 'gitops-deployer' } },
    });
    const repaired = await eventually('the unreadable token renewed', async () => {
      const secret = await secretOf('fresh-dtc');
      return tokenOfKubeconfigSecret(secret) ? secret : undefined;
    });
    assert.equal(repaired.metadata.uid, fresh.metadata.uid);
    assert.equal(
      await whoAmI(kubeconfigOf(repaired)),
      `system:serviceaccount:${ns}-fresh-dtc:gitops-deployer`,
    );
  });
});
