/**
 * The managed-gitops.redhat.com/namespace provisioner (design §7) against the real API server: a claim of
 * such a class gets a namespace, a ServiceAccount with `admin` there only, a kubeconfig Secret that really
 * works, and a bound target; reclaim deletes the namespace (Delete) or keeps it (Retain).
 */
import assert from 'node:assert/strict';
import type { KubeObject } from '@gitops/shared';
import { HttpMethod, KubeApiError, KubeConfig, kubeRequest } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  type AppStudioFixture,
  createAppStudioFixture,
  Kind,
  randomSuffix,
} from '../testing/appstudio-fixture.ts';

const statusOf = (o: KubeObject | undefined) =>
  (o?.status ?? {}) as { phase?: string; conditions?: { type: string; message: string }[] };
const specOf = (o: KubeObject | undefined) => (o?.spec ?? {}) as Record<string, unknown>;

describe('namespace provisioner', () => {
  const f: AppStudioFixture = createAppStudioFixture();
  let ns = '';
  const suffix = randomSuffix();
  const deleteClass = `test-namespace-delete-${suffix}`;
  const retainClass = `test-namespace-retain-${suffix}`;
  const provisionedNamespaces: string[] = [];

  const getNamespace = (name: string) =>
    kubeRequest(f.kc, { method: HttpMethod.GET, path: `/api/v1/namespaces/${name}` }).then(
      (o) => o as KubeObject,
      () => undefined,
    );
  const getClaim = (name: string) => f.get(Kind.DeploymentTargetClaim, ns, name);
  const getTarget = (name: string) => f.get(Kind.DeploymentTarget, ns, name);

  async function provisioned(claim: string, className: string) {
    await f.create(Kind.DeploymentTargetClaim, ns, claim, { spec: { deploymentTargetClassName: className } });
    const bound = await eventually('claim Bound', async () => {
      const c = await getClaim(claim);
      return statusOf(c).phase === 'Bound' &&
        c?.metadata.annotations?.['dt.appstudio.redhat.com/bind-complete'] === 'true'
        ? c
        : undefined;
    });
    assert.equal(specOf(bound).targetName, `${claim}-dt`);
    const target = await eventually('target Bound', async () => {
      const t = await getTarget(`${claim}-dt`);
      return statusOf(t).phase === 'Bound' ? t : undefined;
    });
    const credentials = specOf(target).kubernetesCredentials as Record<string, unknown>;
    const namespace = String(credentials.defaultNamespace);
    provisionedNamespaces.push(namespace);
    assert.equal(namespace, `${ns}-${claim}`);
    assert.equal(credentials.clusterCredentialsSecret, `${claim}-dt-kubeconfig`);
    assert.equal(
      target.metadata.annotations?.['provisioner.appstudio.redhat.com/provisioned-by'],
      'managed-gitops.redhat.com/namespace',
    );
    const created = await getNamespace(namespace);
    assert.equal(
      created?.metadata.labels?.['managed-gitops.redhat.com/provisioned-for-claim'],
      bound.metadata.uid,
    );
    const secret = await f.get(Kind.Secret, ns, `${claim}-dt-kubeconfig`);
    assert.equal(secret?.type, 'managed-gitops.redhat.com/managed-environment');
    const text = Buffer.from(
      String((secret?.data as Record<string, string> | undefined)?.kubeconfig),
      'base64',
    ).toString();
    return { namespace, target: `${claim}-dt`, kubeconfig: text };
  }

  beforeAll(async () => {
    ns = await f.createNamespace('appstudio-nsprov');
    await f.createClass(deleteClass, {
      provisioner: 'managed-gitops.redhat.com/namespace',
      reclaimPolicy: 'Delete',
    });
    await f.createClass(retainClass, {
      provisioner: 'managed-gitops.redhat.com/namespace',
      reclaimPolicy: 'Retain',
    });
    await f.start();
  });
  afterAll(async () => {
    await f.cleanup();
    for (const name of provisionedNamespaces)
      await kubeRequest(f.kc, { method: HttpMethod.DELETE, path: `/api/v1/namespaces/${name}` }).catch(
        () => {},
      );
  });

  it('a claim gets a namespace whose kubeconfig may administer it and nothing else; Delete removes it all, the claim last', async () => {
    const { namespace, target, kubeconfig } = await provisioned('team-dtc', deleteClass);
    const user = new KubeConfig();
    user.loadFromString(kubeconfig);
    // Retried while refused: the admin RoleBinding made a moment ago may not count yet in the API server's
    // RBAC cache (see docs/testing.md).
    await eventually('a ConfigMap written with the token', async () => {
      try {
        await kubeRequest(user, {
          method: HttpMethod.POST,
          path: `/api/v1/namespaces/${namespace}/configmaps`,
          body: { metadata: { name: 'written-with-the-token' } },
        });
        return true;
      } catch (err) {
        if (err instanceof KubeApiError && err.statusCode === 403) return undefined;
        throw err;
      }
    });
    await assert.rejects(
      kubeRequest(user, {
        method: HttpMethod.POST,
        path: `/api/v1/namespaces/${ns}/configmaps`,
        body: { metadata: { name: 'x' } },
      }),
      (err: unknown) => err instanceof KubeApiError && err.statusCode === 403,
    );

    await f.remove(Kind.DeploymentTargetClaim, ns, 'team-dtc');
    await eventually(
      'namespace gone',
      async () => ((await getNamespace(namespace)) === undefined ? true : undefined),
      180_000,
    );
    await eventually('target gone', async () => ((await getTarget(target)) === undefined ? true : undefined));
    await eventually('claim gone', async () =>
      (await getClaim('team-dtc')) === undefined ? true : undefined,
    );
    assert.equal(await f.get(Kind.Secret, ns, 'team-dtc-dt-kubeconfig'), undefined);
  });

  it('Retain keeps the namespace and the kubeconfig; the target is Released', async () => {
    const { namespace, target } = await provisioned('kept-dtc', retainClass);
    await f.remove(Kind.DeploymentTargetClaim, ns, 'kept-dtc');
    await eventually('claim gone', async () =>
      (await getClaim('kept-dtc')) === undefined ? true : undefined,
    );
    const released = await eventually('target Released', async () => {
      const t = await getTarget(target);
      return statusOf(t).phase === 'Released' ? t : undefined;
    });
    assert.equal(specOf(released).claimRef, '');
    assert.equal((await getNamespace(namespace))?.metadata.deletionTimestamp, undefined);
    assert.ok(await f.get(Kind.Secret, ns, 'kept-dtc-dt-kubeconfig'));
  });

  it('a namespace of that name that was not provisioned for the claim is a condition, and is never touched', async () => {
    const taken = `${ns}-taken-dtc`;
    provisionedNamespaces.push(taken);
    await kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: '/api/v1/namespaces',
      body: { metadata: { name: taken } },
    });
    await f.create(Kind.DeploymentTargetClaim, ns, 'taken-dtc', {
      spec: { deploymentTargetClassName: deleteClass },
    });
    await eventually('the condition', async () =>
      statusOf(await getClaim('taken-dtc')).conditions?.find((c) => c.type === 'ErrorOccurred')?.message ===
      `namespace ${taken} already exists and was not provisioned for this DeploymentTargetClaim`
        ? true
        : undefined,
    );
    assert.equal(statusOf(await getClaim('taken-dtc')).phase, 'Pending');
    await f.remove(Kind.DeploymentTargetClaim, ns, 'taken-dtc');
    await eventually('claim gone', async () =>
      (await getClaim('taken-dtc')) === undefined ? true : undefined,
    );
    assert.equal((await getNamespace(taken))?.metadata.deletionTimestamp, undefined);
  });
});
