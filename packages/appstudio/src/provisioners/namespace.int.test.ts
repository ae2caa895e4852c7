/**
 * The managed-gitops.redhat.com/namespace provisioner (appstudio README promise 7) against the real API server: a claim of
 * such a class gets a namespace, a ServiceAccount with `admin` there only, a kubeconfig Secret that really
 * works, and a bound target; reclaim deletes the namespace (Delete) or keeps it (Retain), and only the one
 * provisioned for the target's claim: a DeploymentTarget a user writes never gets another claim's namespace
 * deleted, even one whose name the user's claim would derive too.
 */
import assert from 'node:assert/strict';
import type { KubeObject } from '@gitops/shared';
import { HttpMethod, KubeApiError, KubeConfig, kubeRequest } from '@gitops/shared';
import { eventually, randomSuffix } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type AppStudioFixture, createAppStudioFixture, Kind } from '../testing/appstudio-fixture.ts';

const statusOf = (o: KubeObject | undefined) =>
  (o?.status ?? {}) as { phase?: string; conditions?: { type: string; message: string }[] };
const specOf = (o: KubeObject | undefined) => (o?.spec ?? {}) as Record<string, unknown>;

const f: AppStudioFixture = createAppStudioFixture();
let ns = '';
const suffix = randomSuffix();
const deleteClass = `test-namespace-delete-${suffix}`;
const retainClass = `test-namespace-retain-${suffix}`;
/** The provisioner of the classes under test. */
const provisioner = 'managed-gitops.redhat.com/namespace';
const provisionedNamespaces: string[] = [];
/** Claim namespaces made here rather than by the fixture (a chosen name): their finalizers go in afterAll. */
const claimNamespaces: string[] = [];

const getNamespace = (name: string) =>
  kubeRequest(f.kc, { method: HttpMethod.GET, path: `/api/v1/namespaces/${name}` }).then(
    (o) => o as KubeObject,
    () => undefined,
  );
const getClaim = (name: string, namespace = ns) => f.get(Kind.DeploymentTargetClaim, namespace, name);
const getTarget = (name: string, namespace = ns) => f.get(Kind.DeploymentTarget, namespace, name);

async function provisioned(claim: string, className: string, claimNs = ns) {
  await f.create(Kind.DeploymentTargetClaim, claimNs, claim, {
    spec: { deploymentTargetClassName: className },
  });
  const bound = await eventually('claim Bound', async () => {
    const c = await getClaim(claim, claimNs);
    return statusOf(c).phase === 'Bound' &&
      c?.metadata.annotations?.['dt.appstudio.redhat.com/bind-complete'] === 'true'
      ? c
      : undefined;
  });
  assert.equal(specOf(bound).targetName, `${claim}-dt`);
  const target = await eventually('target Bound', async () => {
    const t = await getTarget(`${claim}-dt`, claimNs);
    return statusOf(t).phase === 'Bound' ? t : undefined;
  });
  const credentials = specOf(target).kubernetesCredentials as Record<string, unknown>;
  const namespace = String(credentials.defaultNamespace);
  provisionedNamespaces.push(namespace);
  assert.equal(namespace, `${claimNs}-${claim}`);
  assert.equal(credentials.clusterCredentialsSecret, `${claim}-dt-kubeconfig`);
  assert.equal(
    target.metadata.annotations?.['provisioner.appstudio.redhat.com/provisioned-by'],
    'managed-gitops.redhat.com/namespace',
  );
  assert.equal(
    target.metadata.annotations?.['managed-gitops.redhat.com/provisioned-for-claim-uid'],
    bound.metadata.uid,
  );
  const created = await getNamespace(namespace);
  assert.equal(
    created?.metadata.labels?.['managed-gitops.redhat.com/provisioned-for-claim'],
    bound.metadata.uid,
  );
  assert.equal(
    created?.metadata.annotations?.['managed-gitops.redhat.com/provisioned-for-claim-ref'],
    `${claimNs}/${claim}`,
  );
  const secret = await f.get(Kind.Secret, claimNs, `${claim}-dt-kubeconfig`);
  assert.equal(secret?.type, 'managed-gitops.redhat.com/managed-environment');
  const text = Buffer.from(
    String((secret?.data as Record<string, string> | undefined)?.kubeconfig),
    'base64',
  ).toString();
  return { namespace, target: `${claim}-dt`, kubeconfig: text, uid: String(bound.metadata.uid) };
}

beforeAll(async () => {
  ns = await f.createNamespace('appstudio-nsprov');
  await f.createClass(deleteClass, { provisioner, reclaimPolicy: 'Delete' });
  await f.createClass(retainClass, { provisioner, reclaimPolicy: 'Retain' });
  await f.start();
});
afterAll(async () => {
  await f.cleanup();
  for (const name of claimNamespaces) {
    for (const kind of [Kind.DeploymentTargetClaim, Kind.DeploymentTarget])
      for (const o of await f.list(kind, name).catch(() => []))
        await f.patch(kind, name, o.metadata.name, { metadata: { finalizers: null } }).catch(() => {});
    await kubeRequest(f.kc, { method: HttpMethod.DELETE, path: `/api/v1/namespaces/${name}` }).catch(
      () => {},
    );
  }
  for (const name of provisionedNamespaces)
    await kubeRequest(f.kc, { method: HttpMethod.DELETE, path: `/api/v1/namespaces/${name}` }).catch(
      () => {},
    );
});

describe('namespace provisioner: provision and reclaim', () => {
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
});

describe('namespace provisioner: namespaces that are not its own', () => {
  it('a namespace of that name that was not provisioned for the claim is a condition, and is never touched', async () => {
    const taken = `${ns}-taken-dtc`;
    provisionedNamespaces.push(taken);
    await f.createNamespaceNamed(taken);
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

  it("a DeploymentTarget a user writes never gets another claim's namespace deleted; a claim already gone still gets its own deleted", async () => {
    // Claim `dtc` in `<ns>-due` and claim `due-dtc` in `<ns>` both derive the namespace `<ns>-due-dtc`.
    const victimNs = `${ns}-due`;
    claimNamespaces.push(victimNs);
    await f.createNamespaceNamed(victimNs);
    const victim = await provisioned('dtc', deleteClass, victimNs);
    assert.equal(victim.namespace, `${ns}-due-dtc`);

    // What a user who may write DeploymentTargets and Secrets in <ns> can write: a target exactly as the
    // provisioner would have made it for a claim `due-dtc` there (even with the victim claim's uid, which is
    // no secret), and one under any other name, both annotated provisioned-by, in a Delete class.
    const forged = (claimRef: string, secret: string, annotations: Record<string, string> = {}) => ({
      metadata: {
        annotations: {
          'provisioner.appstudio.redhat.com/provisioned-by': 'managed-gitops.redhat.com/namespace',
          ...annotations,
        },
      },
      spec: {
        deploymentTargetClassName: deleteClass,
        kubernetesCredentials: {
          defaultNamespace: victim.namespace,
          apiURL: 'https://kubernetes.default.svc',
          clusterCredentialsSecret: secret,
          allowInsecureSkipTLSVerify: false,
        },
        claimRef,
      },
    });
    for (const secret of ['due-dtc-dt-kubeconfig', 'users-own'])
      await f.create(Kind.Secret, ns, secret, { stringData: { kubeconfig: 'mine' } });
    await f.create(
      Kind.DeploymentTarget,
      ns,
      'due-dtc-dt',
      forged('due-dtc', 'due-dtc-dt-kubeconfig', {
        'managed-gitops.redhat.com/provisioned-for-claim-uid': victim.uid,
      }),
    );
    await f.create(Kind.DeploymentTarget, ns, 'grab-dt', forged('', 'users-own'));
    // Both get their finalizer from the reclaimer before they are deleted (or it has nothing to wait for).
    // `due-dtc-dt` names a claim that does not exist here, under Delete: the reclaimer may delete it by
    // itself right after, and be done with it before we look (seen in a loaded run), so gone counts too.
    await eventually('finalizers on the forged targets (or already reclaimed)', async () => {
      for (const name of ['due-dtc-dt', 'grab-dt']) {
        const target = await getTarget(name);
        const gone = target === undefined && name === 'due-dtc-dt';
        if (!gone && !target?.metadata.finalizers?.includes('dt.appstudio.redhat.com/finalizer'))
          return undefined;
      }
      return true;
    });
    await f.remove(Kind.DeploymentTarget, ns, 'due-dtc-dt');
    await f.remove(Kind.DeploymentTarget, ns, 'grab-dt');
    await eventually('forged targets gone, or the victim namespace being deleted', async () => {
      if ((await getNamespace(victim.namespace))?.metadata.deletionTimestamp) return true;
      return (await getTarget('due-dtc-dt')) === undefined && (await getTarget('grab-dt')) === undefined
        ? true
        : undefined;
    });
    const kept = await getNamespace(victim.namespace);
    assert.ok(kept, 'the victim namespace exists');
    assert.equal(kept.metadata.deletionTimestamp, undefined, 'the victim namespace is not being deleted');
    assert.equal(statusOf(await getClaim('dtc', victimNs)).phase, 'Bound');
    assert.ok(await f.get(Kind.Secret, ns, 'due-dtc-dt-kubeconfig'), "the user's Secret is kept");
    assert.ok(await f.get(Kind.Secret, ns, 'users-own'), "the user's Secret is kept");
    assert.ok(await f.get(Kind.Secret, victimNs, 'dtc-dt-kubeconfig'), "the victim's Secret is kept");

    // The victim claim disappears before its target (its finalizer taken away): the reclaimer deletes the
    // target, and deprovisioning, with no claim to ask any more, still deletes the namespace that is its own.
    await f.patch(Kind.DeploymentTargetClaim, victimNs, 'dtc', { metadata: { finalizers: null } });
    await f.remove(Kind.DeploymentTargetClaim, victimNs, 'dtc');
    await eventually('claim gone', async () =>
      (await getClaim('dtc', victimNs)) === undefined ? true : undefined,
    );
    await eventually(
      'the victim namespace gone',
      async () => ((await getNamespace(victim.namespace)) === undefined ? true : undefined),
      180_000,
    );
    await eventually('target gone', async () =>
      (await getTarget(victim.target, victimNs)) === undefined ? true : undefined,
    );
    assert.equal(await f.get(Kind.Secret, victimNs, 'dtc-dt-kubeconfig'), undefined);
  });
});
