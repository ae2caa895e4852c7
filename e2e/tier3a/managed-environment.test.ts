/**
 * Tier 3a: GitOpsDeploymentManagedEnvironment → connection check, ConnectionInitializationSucceeded, Argo CD
 * cluster Secret, and GitOpsDeployments targeting it. The local API server plays the external cluster:
 * ServiceAccounts + the TokenRequest API give real tokens.
 */

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { managedEnvironment } from '@gitops/api/testing';
import type { KubeConfig, KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  type ArgoApplication,
  create,
  type GitOpsDeployment,
  GROUP_VERSION,
  get,
  list,
  mergePatch,
  paths,
  remove,
  untilAllowed,
} from '../fixture/kube.ts';
import { exampleSource, usePlayedArgoCdSystem } from '../fixture/played-argo-cd.ts';
import { randomSuffix } from '../fixture/system.ts';

const SHARD_LABEL = 'managed-gitops.redhat.com/backend-shard';
const SECRET_TYPE = 'managed-gitops.redhat.com/managed-environment';
const CONDITION = 'ConnectionInitializationSucceeded';
const UNUSABLE =
  'Unable to reconcile the ManagedEnvironment. Verify that the ManagedEnvironment and Secret are correctly defined, and have valid credentials';

const envPath = (ns: string, name = '') =>
  `/apis/${GROUP_VERSION}/namespaces/${ns}/gitopsdeploymentmanagedenvironments${name ? `/${name}` : ''}`;
const secretPath = (ns: string, name = '') => `/api/v1/namespaces/${ns}/secrets${name ? `/${name}` : ''}`;

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime: string;
}

function clusterOf(kc: KubeConfig): { server: string; caData: string } {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('no current cluster');
  const caData = cluster.caData ?? (cluster.caFile ? readFileSync(cluster.caFile).toString('base64') : '');
  return { server: cluster.server, caData };
}

/** A standard kubeconfig (JSON is YAML) with one cluster/context/user. */
function kubeconfig(
  server: string,
  token: string,
  caData?: string,
  extra: Record<string, unknown> = {},
): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name: 'c', cluster: { server, ...(caData ? { 'certificate-authority-data': caData } : {}) } },
    ],
    users: [{ name: 'u', user: { token } }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'ctx',
    ...extra,
  });
}

describe('GitOpsDeploymentManagedEnvironment (tier 3a)', () => {
  const f = usePlayedArgoCdSystem();
  let tenant: string;
  let otherTenant: string;
  let saNamespace: string;
  let server: string;
  let caData: string;
  const clusterScoped: string[] = [];

  beforeAll(async () => {
    tenant = await f.given.tenant('menv');
    otherTenant = await f.given.tenant('menv-other');
    saNamespace = await f.given.tenant('menv-sa');
    ({ server, caData } = clusterOf(f.system.kc));
  });
  afterAll(async () => {
    for (const path of clusterScoped) await remove(f.system.kc, path);
  });

  /** A ServiceAccount token from the TokenRequest API; `canList` binds a ClusterRole that may read namespaces. */
  async function serviceAccountToken(canList: boolean): Promise<string> {
    const name = `sa-${randomSuffix()}`;
    await create(f.system.kc, `/api/v1/namespaces/${saNamespace}/serviceaccounts`, { metadata: { name } });
    if (canList) {
      await create(f.system.kc, '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
        metadata: { name },
        rules: [{ apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list'] }],
      });
      await create(f.system.kc, '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
        subjects: [{ kind: 'ServiceAccount', name, namespace: saNamespace }],
      });
      clusterScoped.push(
        `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`,
        `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`,
      );
      // The grant counts before the token is used (the RBAC authorizer reads a cache).
      await untilAllowed(f.system.kc, `system:serviceaccount:${saNamespace}:${name}`, {
        verb: 'list',
        resource: 'namespaces',
      });
    }
    const answer = await create<{ status: { token: string } }>(
      f.system.kc,
      `/api/v1/namespaces/${saNamespace}/serviceaccounts/${name}/token`,
      { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
    );
    return answer.status.token;
  }

  async function createSecret(ns: string, name: string, data: Record<string, string>, type = SECRET_TYPE) {
    await create(f.system.kc, secretPath(ns), {
      metadata: { name },
      type,
      data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
    });
  }

  async function createEnvironment(
    ns: string,
    name: string,
    spec: Record<string, unknown>,
  ): Promise<KubeObject> {
    return await create<KubeObject>(
      f.system.kc,
      envPath(ns),
      managedEnvironment(name, spec as Parameters<typeof managedEnvironment>[1], {
        labels: { [SHARD_LABEL]: f.system.shard },
      }),
    );
  }

  /** Waits for the condition to match `predicate` and returns it. */
  async function conditionOf(
    ns: string,
    name: string,
    predicate: (c: Condition) => boolean,
  ): Promise<Condition> {
    return await eventually(`${CONDITION} of ${ns}/${name}`, async () => {
      const env = await get<KubeObject & { status?: { conditions?: Condition[] } }>(
        f.system.kc,
        envPath(ns, name),
      );
      const condition = env?.status?.conditions?.find((c) => c.type === CONDITION);
      return condition && predicate(condition) ? condition : undefined;
    });
  }

  async function environmentId(uid: string): Promise<string> {
    return await eventually(`environment row of ${uid}`, async () => {
      const row = await f.system.db
        .selectFrom('api_cr_mapping')
        .select('managed_environment_id')
        .where('cr_uid', '=', uid)
        .executeTakeFirst();
      return row?.managed_environment_id ?? undefined;
    });
  }

  const clusterSecret = (id: string) =>
    get<KubeObject & { data?: Record<string, string> }>(
      f.system.kc,
      secretPath(f.system.argoCdNamespace, `managed-env-${id}`),
    );
  const decoded = (secret: { data?: Record<string, string> }) =>
    Object.fromEntries(
      Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
    );

  it('a valid kubeconfig connects: True/Succeeded, and Argo CD gets the cluster Secret managed-env-<id>', async () => {
    const token = await serviceAccountToken(true);
    await createSecret(tenant, 'valid', { kubeconfig: kubeconfig(server, token, caData) });
    const env = await createEnvironment(tenant, 'valid', { apiURL: server, credentialsSecret: 'valid' });
    const condition = await conditionOf(tenant, 'valid', (c) => c.status === 'True');
    assert.equal(condition.reason, 'Succeeded');
    assert.equal(condition.message, '');
    assert.equal(condition.observedGeneration, env.metadata.generation);
    const id = await environmentId(env.metadata.uid!);
    const secret = await eventually('cluster Secret', () => clusterSecret(id));
    assert.equal(secret.metadata.labels?.['argocd.argoproj.io/secret-type'], 'cluster');
    assert.equal(secret.metadata.labels?.['managed-gitops.redhat.com/database-id'], id);
    const data = decoded(secret);
    assert.equal(data.name, `managed-env-${id}`);
    assert.equal(data.server, `${server}?managedEnvironment=${id}`);
    // Argo CD trusts the CA the connection check verified against (the kubeconfig's certificate-authority-data).
    assert.deepEqual(JSON.parse(data.config!), {
      bearerToken: token,
      tlsClientConfig: { insecure: false, caData },
    });
    const tenantRow = await f.system.db
      .selectFrom('cluster_user')
      .select('id')
      .where('namespace_name', '=', tenant)
      .executeTakeFirstOrThrow();
    assert.equal(data.project, `app-project-${tenantRow.id}`);
    assert.equal(data.namespaces, undefined);
    // The stored token is sealed, never plaintext.
    const credentials = await f.system.db.selectFrom('cluster_credentials').selectAll().execute();
    for (const c of credentials)
      assert.ok(!Buffer.from(c.bearer_token_sealed).toString('latin1').includes(token));
  });

  /**
   * A failure row's setup: a Secret holding `data` (of `type`, the environment kind's by default) and an
   * environment of `apiURL` (this API server's by default) naming it.
   */
  const withSecret =
    (data: () => Promise<Record<string, string>> | Record<string, string>, apiURL?: string, type?: string) =>
    async (name: string) => {
      await createSecret(tenant, name, await data(), type);
      return { apiURL: apiURL ?? server, credentialsSecret: name };
    };
  const failures: {
    title: string;
    reason: string;
    message: RegExp | string;
    setup: (name: string) => Promise<Record<string, unknown>>;
  }[] = [
    {
      title: 'a Secret of the wrong type',
      reason: 'InvalidSecretType',
      message: 'invalid secret type: Opaque',
      setup: withSecret(() => ({ kubeconfig: kubeconfig(server, 'x', caData) }), undefined, 'Opaque'),
    },
    {
      title: 'a Secret without the kubeconfig key',
      reason: 'MissingKubeConfigField',
      message: 'missing kubeconfig field in Secret',
      setup: withSecret(() => ({ other: 'x' })),
    },
    {
      title: 'a garbage kubeconfig',
      reason: 'UnableToParseKubeconfigData',
      message: /kubeconfig/,
      setup: withSecret(() => ({ kubeconfig: ': not [valid yaml' })),
    },
    {
      title: 'a kubeconfig without a cluster for apiURL',
      reason: 'UnableToLocateContext',
      message:
        "the kubeconfig did not have a cluster entry that matched the API URL 'https://other.example.com:6443'",
      setup: withSecret(
        () => ({ kubeconfig: kubeconfig(server, 'x', caData) }),
        'https://other.example.com:6443',
      ),
    },
    {
      title: 'an unresolvable host',
      reason: 'UnableToCreateClient',
      message: /does-not-exist\.invalid|ENOTFOUND|EAI_AGAIN/,
      setup: withSecret(
        () => ({ kubeconfig: kubeconfig('https://does-not-exist.invalid:6443', 'x') }),
        'https://does-not-exist.invalid:6443',
      ),
    },
    {
      title: 'a rejected token',
      reason: 'UnableToValidateClusterCredentials',
      message: /401/,
      setup: withSecret(() => ({ kubeconfig: kubeconfig(server, 'not-a-valid-token', caData) })),
    },
    {
      title: 'a ServiceAccount without permissions',
      reason: 'UnableToValidateClusterCredentials',
      message:
        'Provided service account does not have permission to access resources in the cluster. Verify that the service account has the correct Role and RoleBinding.',
      setup: withSecret(async () => ({
        kubeconfig: kubeconfig(server, await serviceAccountToken(false), caData),
      })),
    },
    {
      title: 'a missing Secret',
      reason: 'SecretNotFound',
      message: /not found/,
      setup: async () => ({ apiURL: server, credentialsSecret: 'does-not-exist' }),
    },
  ];
  for (const [index, failure] of failures.entries()) {
    it(`reports ${failure.reason} for ${failure.title}`, async () => {
      const name = `failure-${index}`;
      const spec = await failure.setup(name);
      await createEnvironment(tenant, name, spec);
      const condition = await conditionOf(tenant, name, (c) => c.reason === failure.reason);
      assert.equal(condition.status, 'False');
      if (typeof failure.message === 'string') assert.equal(condition.message, failure.message);
      else assert.match(condition.message, failure.message);
    });
  }

  it('token rotation in the Secret reaches the Argo CD cluster Secret', async () => {
    const first = await serviceAccountToken(true);
    await createSecret(tenant, 'rotating', { kubeconfig: kubeconfig(server, first, caData) });
    const env = await createEnvironment(tenant, 'rotating', {
      apiURL: server,
      credentialsSecret: 'rotating',
    });
    const id = await environmentId(env.metadata.uid!);
    await eventually('first token in Argo CD', async () => {
      const s = await clusterSecret(id);
      return s && JSON.parse(decoded(s).config!).bearerToken === first ? true : undefined;
    });
    const second = await serviceAccountToken(true);
    await mergePatch(f.system.kc, secretPath(tenant, 'rotating'), {
      data: { kubeconfig: Buffer.from(kubeconfig(server, second, caData)).toString('base64') },
    });
    await eventually('rotated token in Argo CD', async () => {
      const s = await clusterSecret(id);
      return s && JSON.parse(decoded(s).config!).bearerToken === second ? true : undefined;
    });
  });

  it('two environments on the same API server are two cluster Secrets; a namespace-scoped one carries namespaces', async () => {
    const token = await serviceAccountToken(true);
    await createSecret(tenant, 'same-server', { kubeconfig: kubeconfig(server, token, caData) });
    const a = await createEnvironment(tenant, 'same-a', { apiURL: server, credentialsSecret: 'same-server' });
    const b = await createEnvironment(tenant, 'same-b', {
      apiURL: server,
      credentialsSecret: 'same-server',
      namespaces: [saNamespace],
      clusterResources: true,
    });
    const [idA, idB] = [await environmentId(a.metadata.uid!), await environmentId(b.metadata.uid!)];
    assert.notEqual(idA, idB);
    const secretA = decoded(await eventually('cluster Secret A', () => clusterSecret(idA)));
    const secretB = decoded(await eventually('cluster Secret B', () => clusterSecret(idB)));
    assert.notEqual(secretA.server, secretB.server);
    assert.equal(secretA.namespaces, undefined);
    assert.equal(secretB.namespaces, saNamespace);
    assert.equal(secretB.clusterResources, 'true');
  });

  it('a GitOpsDeployment targeting an environment deploys to managed-env-<id>; deleting the environment empties the destination and reports the error', async () => {
    const token = await serviceAccountToken(true);
    await createSecret(tenant, 'target', { kubeconfig: kubeconfig(server, token, caData) });
    const env = await createEnvironment(tenant, 'target', { apiURL: server, credentialsSecret: 'target' });
    await conditionOf(tenant, 'target', (c) => c.status === 'True');
    const id = await environmentId(env.metadata.uid!);
    const gd = await f.when.deployed(tenant, 'to-target', exampleSource('p'), {
      type: 'manual',
      destination: { environment: 'target', namespace: 'remote-ns' },
    });
    // The Application with the environment
    const app = await f.expect.application(gd, (a) => a.spec.destination.name === `managed-env-${id}`);
    assert.equal(app.spec.destination.namespace, 'remote-ns');
    const project = await eventually('AppProject lists the environment', async () => {
      const p = await get<KubeObject & { spec: { destinations: { name: string; namespace: string }[] } }>(
        f.system.kc,
        paths.appProject(f.system.argoCdNamespace, app.spec.project),
      );
      return p?.spec.destinations.some((d) => d.name === `managed-env-${id}`) ? p : undefined;
    });
    // The environment is a destination of the tenant's project for any namespace, under the Application's project name.
    assert.deepEqual(
      project.spec.destinations.find((d) => d.name === `managed-env-${id}`),
      { name: `managed-env-${id}`, namespace: '*' },
    );
    assert.equal(project.metadata.name, app.spec.project);
    // Argo CD reports what it reconciled: the user sees the ManagedEnvironment's name, not managed-env-<id>.
    await f.argoCd.reportStatus(app.metadata.name, {
      sync: {
        status: 'Synced',
        revision: 'abc',
        comparedTo: {
          source: exampleSource('p', ''),
          destination: { name: `managed-env-${id}`, namespace: 'remote-ns' },
        },
      },
      health: { status: 'Healthy' },
    });
    await eventually('reconciledState names the environment', async () => {
      const current = await get<GitOpsDeployment>(f.system.kc, paths.gitopsDeployment(tenant, 'to-target'));
      return current?.status?.reconciledState?.destination?.name === 'target' ? true : undefined;
    });

    await remove(f.system.kc, envPath(tenant, 'target'));
    // The Application with an empty destination name
    await f.expect.application(gd, (a) => (a.spec.destination.name ?? '') === '');
    await eventually('cluster Secret deleted', async () => ((await clusterSecret(id)) ? undefined : true));
    await eventually('GitOpsDeployment reports the unusable environment', async () => {
      const current = await get<GitOpsDeployment>(f.system.kc, paths.gitopsDeployment(tenant, 'to-target'));
      const c = current?.status?.conditions?.find((x) => x.type === 'ErrorOccurred');
      return c?.status === 'True' && c.message === UNUSABLE ? true : undefined;
    });
    const rows = await f.system.db
      .selectFrom('managed_environment')
      .select('id')
      .where('id', '=', id)
      .execute();
    assert.equal(rows.length, 0);
  });

  it("a tenant cannot use another tenant's ManagedEnvironment or Secret", async () => {
    const token = await serviceAccountToken(true);
    await createSecret(tenant, 'mine', { kubeconfig: kubeconfig(server, token, caData) });
    await createEnvironment(tenant, 'mine', { apiURL: server, credentialsSecret: 'mine' });
    await conditionOf(tenant, 'mine', (c) => c.status === 'True');
    // The other tenant names our Secret: it resolves in its own namespace only.
    await createEnvironment(otherTenant, 'borrowed', { apiURL: server, credentialsSecret: 'mine' });
    const condition = await conditionOf(otherTenant, 'borrowed', (c) => c.reason === 'SecretNotFound');
    assert.equal(condition.status, 'False');
    // And a GitOpsDeployment of the other tenant naming our environment gets the error.
    await f.when.deployed(otherTenant, 'borrower', exampleSource('p'), {
      type: 'manual',
      destination: { environment: 'mine' },
    });
    await eventually('borrowing GitOpsDeployment reports the error', async () => {
      const current = await get<GitOpsDeployment>(
        f.system.kc,
        paths.gitopsDeployment(otherTenant, 'borrower'),
      );
      const c = current?.status?.conditions?.find((x) => x.type === 'ErrorOccurred');
      return c?.status === 'True' && c.message === UNUSABLE ? true : undefined;
    });
    const apps = await list<ArgoApplication>(f.system.kc, paths.applications(f.system.argoCdNamespace));
    assert.ok(
      !apps.some(
        (a) =>
          a.spec.destination.name?.startsWith('managed-env-') &&
          a.metadata.labels?.['managed-gitops.redhat.com/gitopsdeployment-namespace'] === otherTenant,
      ),
    );
  });

  it('createNewServiceAccount creates argocd-manager-<uid> with a ClusterRole/Binding, deploys with its token, and removes them on delete', async () => {
    // The user's credentials: allowed to create ServiceAccounts, RBAC and tokens (admin).
    const adminToken = await serviceAccountToken(false);
    const name = `sa-admin-${randomSuffix()}`;
    void adminToken;
    await create(f.system.kc, `/api/v1/namespaces/${saNamespace}/serviceaccounts`, { metadata: { name } });
    await create(f.system.kc, '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ kind: 'ServiceAccount', name, namespace: saNamespace }],
    });
    clusterScoped.push(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`);
    await untilAllowed(f.system.kc, `system:serviceaccount:${saNamespace}:${name}`, {
      verb: 'create',
      resource: 'serviceaccounts',
      namespace: 'kube-system',
    });
    const userToken = (
      await create<{ status: { token: string } }>(
        f.system.kc,
        `/api/v1/namespaces/${saNamespace}/serviceaccounts/${name}/token`,
        {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: { expirationSeconds: 3600 },
        },
      )
    ).status.token;
    await createSecret(tenant, 'new-sa', { kubeconfig: kubeconfig(server, userToken, caData) });
    const env = await createEnvironment(tenant, 'new-sa', {
      apiURL: server,
      credentialsSecret: 'new-sa',
      createNewServiceAccount: true,
    });
    await conditionOf(tenant, 'new-sa', (c) => c.status === 'True');
    const saName = `argocd-manager-${env.metadata.uid}`;
    assert.ok(await get(f.system.kc, `/api/v1/namespaces/kube-system/serviceaccounts/${saName}`));
    assert.ok(await get(f.system.kc, `/apis/rbac.authorization.k8s.io/v1/clusterroles/${saName}`));
    assert.ok(await get(f.system.kc, `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${saName}`));
    const id = await environmentId(env.metadata.uid!);
    const secret = decoded(await eventually('cluster Secret', () => clusterSecret(id)));
    const bearer = JSON.parse(secret.config!).bearerToken as string;
    assert.notEqual(bearer, userToken);

    await remove(f.system.kc, envPath(tenant, 'new-sa'));
    await eventually('ManagedEnvironment gone', async () =>
      (await get(f.system.kc, envPath(tenant, 'new-sa'))) ? undefined : true,
    );
    assert.equal(
      await get(f.system.kc, `/api/v1/namespaces/kube-system/serviceaccounts/${saName}`),
      undefined,
    );
    assert.equal(
      await get(f.system.kc, `/apis/rbac.authorization.k8s.io/v1/clusterroles/${saName}`),
      undefined,
    );
    assert.equal(
      await get(f.system.kc, `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${saName}`),
      undefined,
    );
  });

  it('an untrusted CA is reported with a hint at allowInsecureSkipTLSVerify, which then connects', async () => {
    const token = await serviceAccountToken(true);
    await createSecret(tenant, 'no-ca', { kubeconfig: kubeconfig(server, token) });
    await createEnvironment(tenant, 'no-ca', { apiURL: server, credentialsSecret: 'no-ca' });
    const failed = await conditionOf(tenant, 'no-ca', (c) => c.status === 'False');
    assert.equal(failed.reason, 'UnableToValidateClusterCredentials');
    assert.match(failed.message, /\.spec\.allowInsecureSkipTLSVerify/);
    await mergePatch(f.system.kc, envPath(tenant, 'no-ca'), { spec: { allowInsecureSkipTLSVerify: true } });
    const ok = await conditionOf(tenant, 'no-ca', (c) => c.status === 'True');
    assert.equal(ok.observedGeneration, 2);
  });

  it('a GitOpsDeployment created before its environment connects deploys to it once connected', async () => {
    const gd = await f.when.deployed(tenant, 'early', exampleSource('p'), {
      type: 'manual',
      destination: { environment: 'late' },
    });
    await eventually('ErrorOccurred while the environment is missing', async () => {
      const current = await get<GitOpsDeployment>(f.system.kc, paths.gitopsDeployment(tenant, 'early'));
      const c = current?.status?.conditions?.find((x) => x.type === 'ErrorOccurred');
      return c?.status === 'True' && c.message === UNUSABLE ? true : undefined;
    });
    await createSecret(tenant, 'late', {
      kubeconfig: kubeconfig(server, await serviceAccountToken(true), caData),
    });
    const env = await createEnvironment(tenant, 'late', { apiURL: server, credentialsSecret: 'late' });
    const id = await environmentId(env.metadata.uid!);
    // The Application on the environment
    const app = await f.expect.application(gd, (a) => a.spec.destination.name === `managed-env-${id}`);
    assert.equal(app.spec.destination.namespace, tenant);
    await eventually('ErrorOccurred resolved', async () => {
      const current = await get<GitOpsDeployment>(f.system.kc, paths.gitopsDeployment(tenant, 'early'));
      const c = current?.status?.conditions?.find((x) => x.type === 'ErrorOccurred');
      return c?.status === 'False' ? true : undefined;
    });
  });

  it('a hand-edited or deleted cluster Secret is repaired from the database', async () => {
    const token = await serviceAccountToken(true);
    await createSecret(tenant, 'drift', { kubeconfig: kubeconfig(server, token, caData) });
    const env = await createEnvironment(tenant, 'drift', { apiURL: server, credentialsSecret: 'drift' });
    const id = await environmentId(env.metadata.uid!);
    await eventually('cluster Secret', () => clusterSecret(id));
    await mergePatch(f.system.kc, secretPath(f.system.argoCdNamespace, `managed-env-${id}`), {
      data: { server: Buffer.from('https://evil.example.com').toString('base64') },
    });
    await eventually('server repaired', async () => {
      const s = await clusterSecret(id);
      return s && decoded(s).server === `${server}?managedEnvironment=${id}` ? true : undefined;
    });
    await remove(f.system.kc, secretPath(f.system.argoCdNamespace, `managed-env-${id}`));
    await eventually('cluster Secret re-created', () => clusterSecret(id));
  });

  it('no token appears in any log line or operation message', async () => {
    const tokens = (await f.system.db.selectFrom('cluster_credentials').select('id').execute()).length;
    assert.ok(tokens > 0);
    const secrets = await list<KubeObject & { data?: Record<string, string> }>(
      f.system.kc,
      secretPath(f.system.argoCdNamespace),
      'argocd.argoproj.io/secret-type=cluster',
    );
    const bearerTokens = secrets
      .map((s) => JSON.parse(decoded(s).config ?? '{}').bearerToken)
      .filter(Boolean);
    assert.ok(bearerTokens.length > 0);
    const messages = (await f.system.db.selectFrom('operation').select('message').execute()).map(
      (o) => o.message,
    );
    const events = await list<KubeObject & { message?: string }>(
      f.system.kc,
      `/api/v1/namespaces/${tenant}/events`,
    );
    assert.ok(events.length > 0);
    for (const token of bearerTokens) {
      assert.ok(!f.system.logs.some((line) => line.includes(token)), 'a token appears in a log line');
      assert.ok(!events.some((e) => e.message?.includes(token)), 'a token appears in an Event');
      assert.ok(!messages.some((m) => m?.includes(token)), 'a token appears in an operation message');
    }
  });
});
