/**
 * The CRDs' admission rules, checked against the real API server of the test harness (KUBECONFIG, with
 * the CRDs from packages/api/crds installed). Every rule of docs/api.md is exercised with objects that break
 * it (rejected with the contract's message) and objects that satisfy it (accepted).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { request } from 'node:https';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { parse } from 'yaml';
import {
  API_GROUP,
  API_GROUP_VERSION,
  API_VERSION,
  GitOpsDeploymentMessage,
  Kind,
  Kinds,
  loadCrds,
  Plural,
  SUPPORTED_SYNC_OPTIONS,
} from './index.ts';

// ---------------------------------------------------------------------------------------------------
// A minimal API client: @kubernetes/client-node is not a dependency of this package.

interface Endpoint {
  server: string;
  token?: string;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  insecure: boolean;
}

interface Response {
  status: number;
  body: Record<string, unknown>;
}

async function endpointFromKubeconfig(path: string): Promise<Endpoint> {
  type Named<T> = { name: string } & T;
  const config = parse(await readFile(path, 'utf8')) as {
    'current-context': string;
    contexts: Named<{ context: { cluster: string; user: string } }>[];
    clusters: Named<{ cluster: Record<string, string | boolean | undefined> }>[];
    users: Named<{ user: Record<string, string | undefined> }>[];
  };
  const context = config.contexts.find((c) => c.name === config['current-context'])?.context;
  const cluster = config.clusters.find((c) => c.name === context?.cluster)?.cluster;
  const user = config.users.find((u) => u.name === context?.user)?.user ?? {};
  if (!cluster) throw new Error(`${path}: no cluster for the current context`);
  const data = (value: unknown, file: unknown): Promise<Buffer | undefined> | Buffer | undefined =>
    typeof value === 'string'
      ? Buffer.from(value, 'base64')
      : typeof file === 'string'
        ? readFile(file)
        : undefined;
  return {
    server: String(cluster.server),
    token: user.token,
    ca: await data(cluster['certificate-authority-data'], cluster['certificate-authority']),
    cert: await data(user['client-certificate-data'], user['client-certificate']),
    key: await data(user['client-key-data'], user['client-key']),
    insecure: cluster['insecure-skip-tls-verify'] === true,
  };
}

function call(
  endpoint: Endpoint,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
  accept = 'application/json',
): Promise<Response> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, endpoint.server),
      {
        method,
        ca: endpoint.ca,
        cert: endpoint.cert,
        key: endpoint.key,
        // Only for a kubeconfig without any CA (insecure-skip-tls-verify); the harness provides its CA.
        rejectUnauthorized: !endpoint.insecure && endpoint.ca !== undefined,
        headers: {
          accept,
          ...(endpoint.token ? { authorization: `Bearer ${endpoint.token}` } : {}),
          ...(payload === undefined ? {} : { 'content-type': contentType }),
        },
        timeout: 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          try {
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> });
          } catch {
            resolve({ status: res.statusCode ?? 0, body: { message: text } });
          }
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timeout`)));
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

// ---------------------------------------------------------------------------------------------------
// Fixtures

const kubeconfigPath = process.env.KUBECONFIG;
if (!kubeconfigPath) throw new Error('KUBECONFIG is not set: run integration tests with `pnpm test`');
const endpoint = await endpointFromKubeconfig(kubeconfigPath);
const namespace = `api-crds-${randomBytes(4).toString('hex')}`;
let objectCount = 0;

type Obj = Record<string, unknown>;
type Spec = Record<string, unknown>;

const collection = (kind: Kind) => `/apis/${API_GROUP_VERSION}/namespaces/${namespace}/${Plural[kind]}`;
const objectPath = (kind: Kind, name: string) => `${collection(kind)}/${name}`;

function manifest(kind: Kind, spec: Spec): Obj {
  objectCount += 1;
  return {
    apiVersion: API_GROUP_VERSION,
    kind,
    metadata: { name: `${kind.toLowerCase()}-${objectCount}`, namespace },
    spec,
  };
}

/** Creates the object and asserts the API server stored it; returns what it stored. */
async function expectAccepted(kind: Kind, spec: Spec): Promise<Obj> {
  const res = await call(endpoint, 'POST', collection(kind), manifest(kind, spec));
  assert.equal(
    res.status,
    201,
    `expected ${kind} ${JSON.stringify(spec)} to be accepted: ${res.body.message}`,
  );
  return res.body;
}

/** Asserts the response is an admission rejection (422 Invalid) whose message contains `message`. */
function assertInvalid(res: Response, message: string, what: string): void {
  assert.equal(res.status, 422, `expected ${what} to be rejected, got ${res.status}: ${res.body.message}`);
  assert.equal(res.body.reason, 'Invalid');
  assert.ok(
    String(res.body.message).includes(message),
    `expected the rejection of ${what} to say "${message}", got: ${res.body.message}`,
  );
}

async function expectRejected(kind: Kind, spec: Spec, message: string): Promise<void> {
  const res = await call(endpoint, 'POST', collection(kind), manifest(kind, spec));
  assertInvalid(res, message, `${kind} ${JSON.stringify(spec)}`);
}

/** A merge patch of the object's status subresource with `status`. */
function patchStatus(kind: Kind, name: string, status: Obj): Promise<Response> {
  return mergePatch(kind, name, { status }, '/status');
}

/** Patches the object's status with `status` and asserts the API server stored it as it is. */
async function expectStatusStored(kind: Kind, name: string, status: Obj): Promise<void> {
  const res = await patchStatus(kind, name, status);
  assert.equal(res.status, 200, String(res.body.message));
  assert.deepEqual(res.body.status, status);
}

function mergePatch(kind: Kind, name: string, patch: unknown, subresource = ''): Promise<Response> {
  return call(
    endpoint,
    'PATCH',
    `${objectPath(kind, name)}${subresource}`,
    patch,
    'application/merge-patch+json',
  );
}

function jsonPatch(kind: Kind, name: string, ops: unknown[]): Promise<Response> {
  return call(endpoint, 'PATCH', objectPath(kind, name), ops, 'application/json-patch+json');
}

const nameOf = (obj: Obj) => (obj.metadata as { name: string }).name;

beforeAll(async () => {
  for (const crd of await loadCrds()) {
    const res = await call(
      endpoint,
      'GET',
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`,
    );
    assert.equal(res.status, 200, `CRD ${crd.metadata.name} is not installed: ${res.body.message}`);
  }
  const res = await call(endpoint, 'POST', '/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: namespace },
  });
  assert.equal(res.status, 201, `creating namespace ${namespace}: ${res.body.message}`);
});

afterAll(async () => {
  await call(endpoint, 'DELETE', `/api/v1/namespaces/${namespace}`);
});

// ---------------------------------------------------------------------------------------------------
// GitOpsDeployment

const source = { repoURL: 'https://github.com/org/repo', path: 'environments/overlays/dev' };

describe('GitOpsDeployment admission', () => {
  test('accepts a minimal GitOpsDeployment (source and type only)', async () => {
    const stored = await expectAccepted(Kind.GitOpsDeployment, { source, type: 'automated' });
    assert.deepEqual(stored.spec, { source, type: 'automated' });
  });

  test('accepts a full GitOpsDeployment and stores every field as written', async () => {
    const spec = {
      source: { ...source, targetRevision: 'main' },
      destination: { environment: 'my-managed-environment', namespace: 'jane' },
      syncPolicy: { syncOptions: ['CreateNamespace=true', 'CreateNamespace=false'] },
      type: 'manual',
    };
    const stored = await expectAccepted(Kind.GitOpsDeployment, spec);
    assert.deepEqual(stored.spec, spec);
  });

  test('accepts an environment without a namespace, and empty destination and sync options', async () => {
    await expectAccepted(Kind.GitOpsDeployment, {
      source,
      type: 'automated',
      destination: { environment: 'env' },
    });
    await expectAccepted(Kind.GitOpsDeployment, {
      source,
      type: 'automated',
      destination: {},
      syncPolicy: { syncOptions: [] },
    });
    await expectAccepted(Kind.GitOpsDeployment, {
      source,
      type: 'automated',
      destination: { environment: '', namespace: '' },
    });
  });

  test('rejects a type other than manual or automated with "spec type must be manual or automated"', async () => {
    for (const type of ['Manual', 'Automated', 'auto', '', 'sync']) {
      await expectRejected(Kind.GitOpsDeployment, { source, type }, 'spec type must be manual or automated');
    }
  });

  test('rejects a GitOpsDeployment without a type', async () => {
    await expectRejected(Kind.GitOpsDeployment, { source }, 'spec.type: Required value');
  });

  test('rejects a sync option Argo CD does not have or a tenant may not set with the mispelled-sync-option message, listing what is supported', async () => {
    const message =
      'the specified sync option in .spec.syncPolicy.syncOptions is either mispelled or is not supported by GitOpsDeployment; supported are CreateNamespace=true, CreateNamespace=false, ServerSideApply=true';
    for (const option of [
      'CreateNamespace=True',
      'CreateNamspace=true',
      'Validate=False',
      // Resource-level options (annotations of one resource in Argo CD), not the Application's.
      'SkipDryRunOnMissingResource=true',
      'Prune=false',
      'PrunePropagationPolicy=sometimes',
      '',
    ]) {
      await expectRejected(
        Kind.GitOpsDeployment,
        { source, type: 'automated', syncPolicy: { syncOptions: ['CreateNamespace=true', option] } },
        message,
      );
    }
  });

  test("accepts every supported sync option, and Argo CD's sync, diff, Helm, Kustomize and directory controls, storing them as written", async () => {
    for (let i = 0; i < SUPPORTED_SYNC_OPTIONS.length; i += 10) {
      const syncOptions = SUPPORTED_SYNC_OPTIONS.slice(i, i + 10);
      const stored = await expectAccepted(Kind.GitOpsDeployment, {
        source,
        type: 'automated',
        syncPolicy: { syncOptions },
      });
      assert.deepEqual((stored.spec as { syncPolicy: unknown }).syncPolicy, { syncOptions });
    }
    const helm = {
      source: {
        ...source,
        targetRevision: 'v1.2.0',
        helm: {
          valueFiles: ['values-prod.yaml'],
          values: 'replicas: 2\n',
          parameters: [
            { name: 'image.tag', value: 'v2' },
            { name: 'port', value: '8080', forceString: true },
          ],
          releaseName: 'web',
          skipCrds: true,
        },
      },
      type: 'automated',
      syncPolicy: {
        automated: { prune: false, selfHeal: false, allowEmpty: false },
        retry: { limit: 3, backoff: { duration: '10s', factor: 3, maxDuration: '5m' } },
        syncOptions: ['ServerSideApply=true', 'PruneLast=true'],
      },
      ignoreDifferences: [
        { group: 'apps', kind: 'Deployment', jsonPointers: ['/spec/replicas'] },
        { kind: 'ConfigMap', name: 'generated', namespace: 'jane', jqPathExpressions: ['.data.injected'] },
        { group: 'apps', kind: 'Deployment', managedFieldsManagers: ['kube-controller-manager'] },
      ],
      revisionHistoryLimit: 3,
    };
    assert.deepEqual((await expectAccepted(Kind.GitOpsDeployment, helm)).spec, helm);
    const valuesObject = {
      source: { ...source, helm: { valuesObject: { replicas: 2, image: { tag: 'v2' }, list: [1, 'two'] } } },
      type: 'manual',
      syncPolicy: { retry: { limit: -1 } },
    };
    assert.deepEqual((await expectAccepted(Kind.GitOpsDeployment, valuesObject)).spec, valuesObject);
    const kustomize = {
      source: {
        ...source,
        kustomize: {
          images: ['registry.example/app:v2', 'app=registry.example/app@sha256:0123abcd'],
          namePrefix: 'prod-',
          nameSuffix: '-v2',
          commonLabels: { team: 'payments' },
          commonAnnotations: { 'example.com/owner': 'Jane Doe' },
          patches: [
            {
              target: { kind: 'Deployment', name: 'web' },
              patch: '- op: replace\n  path: /spec/replicas\n  value: 3\n',
            },
            { path: 'patches/memory.yaml' },
          ],
          namespace: 'jane',
        },
      },
      type: 'automated',
    };
    assert.deepEqual((await expectAccepted(Kind.GitOpsDeployment, kustomize)).spec, kustomize);
    const directory = {
      source: { ...source, directory: { recurse: true, include: '{a.yaml,b.yaml}', exclude: 'test-*' } },
      type: 'automated',
    };
    assert.deepEqual((await expectAccepted(Kind.GitOpsDeployment, directory)).spec, directory);
  });

  test('rejects Argo CD controls a tenant got wrong, each with its message', async () => {
    const cases: [Spec, string][] = [
      [
        { source, type: 'manual', syncPolicy: { automated: { prune: false } } },
        'spec.syncPolicy.automated is only for type automated',
      ],
      [
        { source: { ...source, helm: {}, kustomize: {} }, type: 'automated' },
        'set at most one of spec.source.helm, spec.source.kustomize and spec.source.directory',
      ],
      [
        { source: { ...source, helm: { values: 'a: 1', valuesObject: { a: 1 } } }, type: 'automated' },
        'set spec.source.helm.values or spec.source.helm.valuesObject, not both',
      ],
      [
        { source: { ...source, helm: { releaseName: 'Web_1' } }, type: 'automated' },
        'spec.source.helm.releaseName must be a Helm release name',
      ],
      [
        { source: { ...source, helm: { values: 'x'.repeat(65_537) } }, type: 'automated' },
        'spec.source.helm.values: Too long',
      ],
      [
        { source: { ...source, helm: { parameters: [{ value: 'v' }] } }, type: 'automated' },
        'spec.source.helm.parameters[0].name: Required value',
      ],
      [
        { source: { ...source, kustomize: { patches: [{ patch: 'a', path: 'b' }] } }, type: 'automated' },
        'each of spec.source.kustomize.patches needs exactly one of patch and path',
      ],
      [
        { source: { ...source, kustomize: { namespace: 'Not_A_Namespace' } }, type: 'automated' },
        'spec.source.kustomize.namespace must be a namespace name',
      ],
      [
        { source: { ...source, kustomize: { images: ['app:v1 --load-restrictor'] } }, type: 'automated' },
        'spec.source.kustomize.images must not contain spaces or control characters',
      ],
      [
        { source, type: 'automated', syncPolicy: { retry: { backoff: { duration: '5 seconds' } } } },
        'spec.syncPolicy.retry.backoff.duration must be a duration such as 5s',
      ],
      [
        { source, type: 'automated', syncPolicy: { retry: { limit: -2 } } },
        'spec.syncPolicy.retry.limit: Invalid value: -2',
      ],
      [
        {
          source,
          type: 'automated',
          ignoreDifferences: [{ group: 'apps', jsonPointers: ['/spec/replicas'] }],
        },
        'spec.ignoreDifferences[0].kind: Required value',
      ],
      [
        {
          source,
          type: 'automated',
          ignoreDifferences: [{ kind: 'Deployment', jsonPointers: ['spec/replicas'] }],
        },
        "each of spec.ignoreDifferences[].jsonPointers must start with '/'",
      ],
      [
        { source, type: 'automated', revisionHistoryLimit: 101 },
        'spec.revisionHistoryLimit: Invalid value: 101',
      ],
    ];
    for (const [spec, message] of cases) await expectRejected(Kind.GitOpsDeployment, spec, message);
  });

  test('accepts a chart of a Helm repository, an OCI repository and several sources with a ref, storing them as written', async () => {
    const helmRepository = {
      source: {
        repoURL: 'https://charts.example.com/stable',
        chart: 'sealed-secrets',
        targetRevision: '1.16.1',
        helm: { releaseName: 'sealed-secrets', valuesObject: { replicas: 2 } },
      },
      type: 'automated',
    };
    assert.deepEqual((await expectAccepted(Kind.GitOpsDeployment, helmRepository)).spec, helmRepository);
    const oci = {
      source: { repoURL: 'oci://registry.example.com/charts/nginx', path: '.', targetRevision: '15.9.0' },
      type: 'manual',
    };
    assert.deepEqual((await expectAccepted(Kind.GitOpsDeployment, oci)).spec, oci);
    const sources = {
      sources: [
        {
          repoURL: 'http://charts.example.com',
          chart: 'web',
          targetRevision: '2.0.0',
          helm: { valueFiles: ['$values/web/values-prod.yaml'] },
        },
        { repoURL: source.repoURL, targetRevision: 'main', ref: 'values' },
        { repoURL: source.repoURL, path: 'extra', directory: { recurse: true } },
      ],
      type: 'automated',
    };
    assert.deepEqual((await expectAccepted(Kind.GitOpsDeployment, sources)).spec, sources);
  });

  test('rejects a chart, a ref or sources a tenant got wrong, each with its message', async () => {
    const chartSource = { repoURL: 'https://charts.example.com', chart: 'web', targetRevision: '1.0.0' };
    const cases: [Spec, string][] = [
      [
        { source: { ...chartSource, path: 'web' }, type: 'automated' },
        'spec.source.chart and spec.source.path are exclusive: a chart of a Helm repository has no path',
      ],
      [
        { source: { ...chartSource, repoURL: 'file:///srv/git/charts.git' }, type: 'automated' },
        'spec.source.chart needs a Helm repository in spec.source.repoURL (http:// or https://)',
      ],
      [
        { source: { ...chartSource, repoURL: 'oci://registry.example.com/charts' }, type: 'automated' },
        "a chart in an OCI registry by repoURL oci://<registry>/<repository>/<chart> and path '.'",
      ],
      [
        { source: { ...chartSource, kustomize: { namePrefix: 'a-' } }, type: 'automated' },
        'spec.source.chart is a Helm chart, so spec.source.helm applies to it, not kustomize or directory',
      ],
      [
        { source: { ...chartSource, chart: '../web' }, type: 'automated' },
        "spec.source.chart must be a chart name (letters, digits, '-', '_' and '.')",
      ],
      [
        { source: { ...source, ref: 'values' }, type: 'automated' },
        'spec.source.ref is only for one of spec.sources',
      ],
      [{ type: 'automated' }, 'set exactly one of spec.source and spec.sources'],
      [{ source, sources: [source], type: 'automated' }, 'set exactly one of spec.source and spec.sources'],
      [
        { sources: [], type: 'automated' },
        'spec.sources: Invalid value: 0: spec.sources in body should have at least 1 items',
      ],
      [
        { sources: Array.from({ length: 9 }, () => source), type: 'automated' },
        'spec.sources: Too many: 9: must have at most 8 items',
      ],
      [
        { sources: [{ repoURL: source.repoURL }], type: 'automated' },
        'each of spec.sources needs a path, a chart (of a Helm repository) or a ref',
      ],
      [{ sources: [{ ...source, path: '/' }], type: 'automated' }, "spec.sources[].path cannot be '/'"],
      [
        { sources: [{ ...chartSource, path: 'web' }], type: 'automated' },
        'spec.sources[].chart and spec.sources[].path are exclusive',
      ],
      [
        { sources: [{ ...chartSource, repoURL: 'ssh://git@git.example.com/charts.git' }], type: 'automated' },
        'spec.sources[].chart needs a Helm repository in repoURL (http:// or https://)',
      ],
      [
        { sources: [{ ...source, helm: {}, directory: {} }], type: 'automated' },
        'set at most one of helm, kustomize and directory in each of spec.sources',
      ],
      [
        {
          sources: [
            { ...source, ref: 'values' },
            { ...source, path: 'other', ref: 'values' },
          ],
          type: 'automated',
        },
        'each ref of spec.sources must be unique',
      ],
      [
        { sources: [{ ...chartSource, ref: 'values' }], type: 'automated' },
        'spec.sources[].ref and spec.sources[].chart are exclusive',
      ],
      [
        { sources: [{ ...source, ref: '$values' }], type: 'automated' },
        "spec.sources[].ref must be letters, digits, '_' and '-'",
      ],
      [
        { sources: [{ ...source, repoURL: `${source.repoURL}\u0000` }], type: 'automated' },
        'spec.sources[].repoURL must not contain control characters',
      ],
    ];
    for (const [spec, message] of cases) await expectRejected(Kind.GitOpsDeployment, spec, message);
  });

  test('rejects a destination namespace without an environment', async () => {
    const message = 'the environment field should not be empty when the namespace is non-empty';
    await expectRejected(
      Kind.GitOpsDeployment,
      { source, type: 'automated', destination: { namespace: 'jane' } },
      message,
    );
    await expectRejected(
      Kind.GitOpsDeployment,
      { source, type: 'automated', destination: { namespace: 'jane', environment: '' } },
      message,
    );
  });

  test('rejects a destination namespace that is no namespace name with the original message, naming the field', async () => {
    for (const namespace of ['Jane', 'jane_1', '-jane', 'jane-', 'a.b']) {
      await expectRejected(
        Kind.GitOpsDeployment,
        { source, type: 'automated', destination: { environment: 'env', namespace } },
        `${GitOpsDeploymentMessage.InvalidDestinationNamespace}: spec.destination.namespace must be a namespace name`,
      );
    }
  });

  test('rejects a missing or empty spec.source.path as a required field', async () => {
    const message = 'spec.source.path is a required field and it cannot be empty';
    await expectRejected(
      Kind.GitOpsDeployment,
      { source: { repoURL: source.repoURL }, type: 'automated' },
      message,
    );
    await expectRejected(
      Kind.GitOpsDeployment,
      { source: { repoURL: source.repoURL, path: '' }, type: 'automated' },
      message,
    );
  });

  test("rejects spec.source.path '/' with \"spec.source.path cannot be '/'\"", async () => {
    await expectRejected(
      Kind.GitOpsDeployment,
      { source: { repoURL: source.repoURL, path: '/' }, type: 'manual' },
      "spec.source.path cannot be '/'",
    );
  });

  test('rejects control characters in repoURL, path and targetRevision, and over-long values', async () => {
    for (const [field, value] of [
      ['repoURL', `${source.repoURL}\u0000`],
      ['path', 'dev\nprod'],
      ['targetRevision', 'main\u001b[31m'],
    ] as const) {
      await expectRejected(
        Kind.GitOpsDeployment,
        { source: { ...source, [field]: value }, type: 'automated' },
        `spec.source.${field} must not contain control characters`,
      );
    }
    await expectRejected(
      Kind.GitOpsDeployment,
      { source: { ...source, targetRevision: 'x'.repeat(256) }, type: 'automated' },
      'spec.source.targetRevision: Too long: may not be more than 255',
    );
    await expectAccepted(Kind.GitOpsDeployment, {
      source: { ...source, path: 'apps/überall/ünïcode', targetRevision: 'release/2026.11' },
      type: 'automated',
    });
  });

  test('rejects a SyncRun revision with control characters or over 255 characters', async () => {
    await expectRejected(
      Kind.GitOpsDeploymentSyncRun,
      { gitopsDeploymentName: 'app', revisionID: 'main\u0000' },
      'spec.revisionID must not contain control characters',
    );
    await expectRejected(
      Kind.GitOpsDeploymentSyncRun,
      { gitopsDeploymentName: 'app', revisionId: 'x'.repeat(256) },
      'spec.revisionId: Too long: may not be more than 255',
    );
  });

  test('reports every broken rule of one object at once', async () => {
    const res = await call(
      endpoint,
      'POST',
      collection(Kind.GitOpsDeployment),
      manifest(Kind.GitOpsDeployment, {
        source: { repoURL: source.repoURL, path: '/' },
        destination: { namespace: 'jane' },
        syncPolicy: { syncOptions: ['Validate=False'] },
        type: 'Manual',
      }),
    );
    for (const message of [
      "spec.source.path cannot be '/'",
      'the environment field should not be empty when the namespace is non-empty',
      'is either mispelled or is not supported by GitOpsDeployment',
      'spec type must be manual or automated',
    ]) {
      assertInvalid(res, message, 'a GitOpsDeployment breaking four rules');
    }
  });

  test('applies the same rules on update', async () => {
    const stored = await expectAccepted(Kind.GitOpsDeployment, { source, type: 'automated' });
    const name = nameOf(stored);
    assertInvalid(
      await mergePatch(Kind.GitOpsDeployment, name, { spec: { type: 'sometimes' } }),
      'spec type must be manual or automated',
      'changing type to sometimes',
    );
    assertInvalid(
      await mergePatch(Kind.GitOpsDeployment, name, { spec: { source: { path: '/' } } }),
      "spec.source.path cannot be '/'",
      "changing path to '/'",
    );
    assertInvalid(
      await mergePatch(Kind.GitOpsDeployment, name, { spec: { source: { path: null } } }),
      'spec.source.path is a required field and it cannot be empty',
      'removing path',
    );
    const ok = await mergePatch(Kind.GitOpsDeployment, name, {
      spec: { type: 'manual', source: { path: 'other' }, destination: { environment: 'e', namespace: 'n' } },
    });
    assert.equal(ok.status, 200, String(ok.body.message));
  });

  test('status is written through the /status subresource: typed fields kept, operationState passed through, unknown fields pruned', async () => {
    const stored = await expectAccepted(Kind.GitOpsDeployment, { source, type: 'automated' });
    const name = nameOf(stored);
    const status = {
      sync: { status: 'Synced', revision: 'abc123' },
      health: { status: 'Progressing', message: 'waiting for rollout' },
      resources: [
        {
          group: 'apps',
          version: 'v1',
          kind: 'Deployment',
          namespace,
          name: 'web',
          status: 'Synced',
          health: { status: 'Progressing', message: 'waiting' },
        },
        { group: '', version: 'v1', kind: 'ConfigMap', namespace, name: 'cfg', status: 'Synced' },
      ],
      reconciledState: {
        source: { path: source.path, repoURL: source.repoURL, branch: 'main' },
        destination: { name: '', namespace },
      },
      operationState: {
        operation: { sync: { revision: 'abc123' }, initiatedBy: { username: 'gitops-service' } },
        phase: 'Succeeded',
        message: 'successfully synced (all tasks run)',
        syncResult: { revision: 'abc123', resources: [{ kind: 'ConfigMap', name: 'cfg', status: 'Synced' }] },
        startedAt: '2026-01-01T00:00:00Z',
        finishedAt: '2026-01-01T00:00:05Z',
        retryCount: 1,
      },
      conditions: [
        {
          type: 'ErrorOccurred',
          status: 'False',
          reason: 'ErrorOccurredResolved',
          message: '',
          lastProbeTime: '2026-01-01T00:00:00Z',
          lastTransitionTime: '2026-01-01T00:00:00Z',
        },
        {
          type: 'ComparisonError',
          status: 'True',
          reason: 'ComparisonError',
          message: 'rpc error',
          lastProbeTime: '2026-01-01T00:00:00Z',
          lastTransitionTime: '2026-01-01T00:00:00Z',
        },
      ],
    };
    const res = await patchStatus(Kind.GitOpsDeployment, name, {
      ...status,
      sync: { ...status.sync, notInTheSchema: 'x' },
    });
    assert.equal(res.status, 200, String(res.body.message));
    assert.deepEqual(res.body.status, status);

    const viaMainResource = await mergePatch(Kind.GitOpsDeployment, name, {
      status: { sync: { status: 'OutOfSync' } },
    });
    assert.equal(viaMainResource.status, 200, String(viaMainResource.body.message));
    assert.deepEqual(
      (viaMainResource.body.status as { sync: unknown }).sync,
      status.sync,
      'status changes through the main resource are ignored',
    );
  });

  test('rejects a status condition without a type, or with a status other than True/False/Unknown', async () => {
    const name = nameOf(await expectAccepted(Kind.GitOpsDeployment, { source, type: 'automated' }));
    const noType = await patchStatus(Kind.GitOpsDeployment, name, { conditions: [{ status: 'True' }] });
    assertInvalid(noType, 'Required value', 'a condition without a type');
    const badStatus = await patchStatus(Kind.GitOpsDeployment, name, {
      conditions: [{ type: 'ErrorOccurred', status: 'Maybe' }],
    });
    assertInvalid(badStatus, 'Unsupported value', 'a condition with status Maybe');
  });
});

// ---------------------------------------------------------------------------------------------------
// GitOpsDeploymentSyncRun

describe('GitOpsDeploymentSyncRun admission', () => {
  test('accepts a SyncRun with only gitopsDeploymentName, with revisionID, and with the doc alias revisionId', async () => {
    await expectAccepted(Kind.GitOpsDeploymentSyncRun, { gitopsDeploymentName: 'my-depl' });
    const full = await expectAccepted(Kind.GitOpsDeploymentSyncRun, {
      gitopsDeploymentName: 'my-depl',
      revisionID: 'main',
    });
    assert.deepEqual(full.spec, { gitopsDeploymentName: 'my-depl', revisionID: 'main' });
    const alias = await expectAccepted(Kind.GitOpsDeploymentSyncRun, {
      gitopsDeploymentName: 'my-depl',
      revisionId: 'v1.2.3',
    });
    assert.deepEqual(alias.spec, { gitopsDeploymentName: 'my-depl', revisionId: 'v1.2.3' });
  });

  test('rejects a SyncRun without gitopsDeploymentName, or with an empty one', async () => {
    await expectRejected(
      Kind.GitOpsDeploymentSyncRun,
      { revisionID: 'main' },
      'spec.gitopsDeploymentName: Required value',
    );
    await expectRejected(
      Kind.GitOpsDeploymentSyncRun,
      { gitopsDeploymentName: '' },
      'spec.gitopsDeploymentName',
    );
  });

  test('rejects setting both revisionID and its alias revisionId', async () => {
    await expectRejected(
      Kind.GitOpsDeploymentSyncRun,
      { gitopsDeploymentName: 'my-depl', revisionID: 'main', revisionId: 'main' },
      'set at most one of revisionID and revisionId',
    );
  });

  test('rejects changing gitopsDeploymentName', async () => {
    const name = nameOf(
      await expectAccepted(Kind.GitOpsDeploymentSyncRun, { gitopsDeploymentName: 'a', revisionID: 'main' }),
    );
    assertInvalid(
      await mergePatch(Kind.GitOpsDeploymentSyncRun, name, { spec: { gitopsDeploymentName: 'b' } }),
      'gitopsDeploymentName is immutable',
      'changing gitopsDeploymentName',
    );
  });

  test('rejects changing, adding or removing revisionID (under either spelling)', async () => {
    const withRevision = nameOf(
      await expectAccepted(Kind.GitOpsDeploymentSyncRun, { gitopsDeploymentName: 'a', revisionID: 'main' }),
    );
    const withoutRevision = nameOf(
      await expectAccepted(Kind.GitOpsDeploymentSyncRun, { gitopsDeploymentName: 'a' }),
    );
    const withAlias = nameOf(
      await expectAccepted(Kind.GitOpsDeploymentSyncRun, { gitopsDeploymentName: 'a', revisionId: 'main' }),
    );
    const message = 'revisionID is immutable';
    assertInvalid(
      await mergePatch(Kind.GitOpsDeploymentSyncRun, withRevision, { spec: { revisionID: 'other' } }),
      message,
      'changing revisionID',
    );
    assertInvalid(
      await jsonPatch(Kind.GitOpsDeploymentSyncRun, withRevision, [
        { op: 'remove', path: '/spec/revisionID' },
      ]),
      message,
      'removing revisionID',
    );
    assertInvalid(
      await mergePatch(Kind.GitOpsDeploymentSyncRun, withoutRevision, { spec: { revisionID: 'main' } }),
      message,
      'adding revisionID',
    );
    assertInvalid(
      await mergePatch(Kind.GitOpsDeploymentSyncRun, withoutRevision, { spec: { revisionId: 'main' } }),
      message,
      'adding revisionId',
    );
    assertInvalid(
      await mergePatch(Kind.GitOpsDeploymentSyncRun, withAlias, { spec: { revisionId: 'other' } }),
      message,
      'changing revisionId',
    );
  });

  test('allows updates that leave gitopsDeploymentName and revisionID alone (metadata, status)', async () => {
    const name = nameOf(
      await expectAccepted(Kind.GitOpsDeploymentSyncRun, { gitopsDeploymentName: 'a', revisionID: 'main' }),
    );
    const labelled = await mergePatch(Kind.GitOpsDeploymentSyncRun, name, {
      metadata: { labels: { team: 'jane' }, annotations: { note: 'hello' } },
      spec: { gitopsDeploymentName: 'a', revisionID: 'main' },
    });
    assert.equal(labelled.status, 200, String(labelled.body.message));
    const condition = {
      type: 'ErrorOccurred',
      status: 'False',
      reason: '',
      message: '',
      lastTransitionTime: '2026-01-01T00:00:00Z',
    };
    await expectStatusStored(Kind.GitOpsDeploymentSyncRun, name, { conditions: [condition] });
  });
  test('terminate can be set later but never undone', async () => {
    const name = nameOf(await expectAccepted(Kind.GitOpsDeploymentSyncRun, { gitopsDeploymentName: 'a' }));
    const set = await mergePatch(Kind.GitOpsDeploymentSyncRun, name, { spec: { terminate: true } });
    assert.equal(set.status, 200, String(set.body.message));
    assertInvalid(
      await mergePatch(Kind.GitOpsDeploymentSyncRun, name, { spec: { terminate: false } }),
      'terminate cannot be undone',
      'setting terminate back to false',
    );
    assertInvalid(
      await jsonPatch(Kind.GitOpsDeploymentSyncRun, name, [{ op: 'remove', path: '/spec/terminate' }]),
      'terminate cannot be undone',
      'removing terminate',
    );
  });

  test('kubectl get shows the phase of the sync; the status keeps revision, times, message, health and sync status', async () => {
    const name = nameOf(await expectAccepted(Kind.GitOpsDeploymentSyncRun, { gitopsDeploymentName: 'a' }));
    const status = {
      phase: 'Succeeded',
      revision: 'abc123',
      startedAt: '2026-01-01T10:00:00Z',
      finishedAt: '2026-01-01T10:00:05Z',
      message: 'successfully synced (all tasks run)',
      health: 'Healthy',
      syncStatus: 'Synced',
    };
    await expectStatusStored(Kind.GitOpsDeploymentSyncRun, name, status);
    const badPhase = await patchStatus(Kind.GitOpsDeploymentSyncRun, name, { phase: 'Done' });
    assertInvalid(badPhase, 'Unsupported value', 'an unknown phase');
    const table = await call(
      endpoint,
      'GET',
      objectPath(Kind.GitOpsDeploymentSyncRun, name),
      undefined,
      'application/json',
      'application/json;as=Table;v=v1;g=meta.k8s.io',
    );
    assert.equal(table.status, 200, String(table.body.message));
    const columns = (table.body.columnDefinitions as { name: string }[]).map((c) => c.name);
    const cells = (table.body.rows as { cells: unknown[] }[])[0]?.cells ?? [];
    assert.equal(cells[columns.indexOf('Phase')], 'Succeeded');
    assert.equal(cells[columns.indexOf('Synced')], 'abc123');
    assert.equal(cells[columns.indexOf('Health')], 'Healthy');
  });
});

// ---------------------------------------------------------------------------------------------------
// GitOpsDeploymentManagedEnvironment

const managedEnvironment = {
  apiURL: 'https://api.cluster:6443',
  credentialsSecret: 'my-env-secret',
  allowInsecureSkipTLSVerify: false,
};

describe('GitOpsDeploymentManagedEnvironment admission', () => {
  test('accepts a minimal and a full ManagedEnvironment', async () => {
    await expectAccepted(Kind.GitOpsDeploymentManagedEnvironment, managedEnvironment);
    const full = {
      ...managedEnvironment,
      allowInsecureSkipTLSVerify: true,
      createNewServiceAccount: true,
      namespaces: ['a', 'b', 'team-1', 'x'.repeat(63)],
      clusterResources: true,
    };
    const stored = await expectAccepted(Kind.GitOpsDeploymentManagedEnvironment, full);
    assert.deepEqual(stored.spec, full);
  });

  test('accepts https API URLs with a host, port and path', async () => {
    for (const apiURL of [
      'https://api.cluster:6443',
      'https://10.0.0.1',
      'https://api.example.com/k8s/clusters/c-1',
      'HTTPS://api.cluster:6443',
    ]) {
      await expectAccepted(Kind.GitOpsDeploymentManagedEnvironment, { ...managedEnvironment, apiURL });
    }
  });

  test('rejects an API URL that is not https, has no host, or has a query with "cluster api url must start with https://"', async () => {
    for (const apiURL of [
      'http://api.cluster:6443',
      'api.cluster:6443',
      'ftp://api.cluster',
      '',
      'https://',
      'https://api.cluster:6443?managedEnvironment=1',
      'https://api.cluster:6443/?a=b&c=d',
      'https://api.cluster:6443/a&b',
    ]) {
      await expectRejected(
        Kind.GitOpsDeploymentManagedEnvironment,
        { ...managedEnvironment, apiURL },
        'cluster api url must start with https://',
      );
    }
  });

  test('rejects namespaces that are not DNS-1123 labels', async () => {
    for (const ns of ['Team', 'team_1', '-team', 'team-', 'a.b', '']) {
      await expectRejected(
        Kind.GitOpsDeploymentManagedEnvironment,
        { ...managedEnvironment, namespaces: ['ok', ns] },
        'must be a valid DNS-1123 label',
      );
    }
    await expectRejected(
      Kind.GitOpsDeploymentManagedEnvironment,
      { ...managedEnvironment, namespaces: ['x'.repeat(64)] },
      'spec.namespaces[0]: Too long',
    );
  });

  test('rejects a ManagedEnvironment without apiURL or credentialsSecret', async () => {
    for (const field of ['apiURL', 'credentialsSecret'] as const) {
      const spec: Spec = { ...managedEnvironment };
      delete spec[field];
      await expectRejected(Kind.GitOpsDeploymentManagedEnvironment, spec, `spec.${field}: Required value`);
    }
  });

  test('accepts a ManagedEnvironment without allowInsecureSkipTLSVerify (optional in the public API document) and reads it back false', async () => {
    const { allowInsecureSkipTLSVerify: _omitted, ...spec } = managedEnvironment;
    const stored = await expectAccepted(Kind.GitOpsDeploymentManagedEnvironment, spec);
    assert.equal((stored.spec as Spec).allowInsecureSkipTLSVerify, false);
    const read = await call(
      endpoint,
      'GET',
      objectPath(Kind.GitOpsDeploymentManagedEnvironment, nameOf(stored)),
    );
    assert.equal((read.body.spec as Spec).allowInsecureSkipTLSVerify, false);
  });

  test('stores a standard metav1.Condition with observedGeneration through /status, and rejects a malformed one', async () => {
    const name = nameOf(await expectAccepted(Kind.GitOpsDeploymentManagedEnvironment, managedEnvironment));
    const condition = {
      type: 'ConnectionInitializationSucceeded',
      status: 'False',
      reason: 'UnableToLocateContext',
      message:
        "the kubeconfig did not have a cluster entry that matched the API URL 'https://api.cluster:6443'",
      observedGeneration: 1,
      lastTransitionTime: '2026-01-01T00:00:00Z',
    };
    await expectStatusStored(Kind.GitOpsDeploymentManagedEnvironment, name, { conditions: [condition] });

    const succeeded = { ...condition, status: 'True', reason: 'Succeeded', message: '' };
    const empty = await patchStatus(Kind.GitOpsDeploymentManagedEnvironment, name, {
      conditions: [succeeded],
    });
    assert.equal(empty.status, 200, `an empty message is allowed: ${empty.body.message}`);

    const { reason: _reason, ...withoutReason } = condition;
    assertInvalid(
      await patchStatus(Kind.GitOpsDeploymentManagedEnvironment, name, { conditions: [withoutReason] }),
      'reason: Required value',
      'a condition without a reason',
    );
  });
});

// ---------------------------------------------------------------------------------------------------
// GitOpsDeploymentRepositoryCredential

describe('GitOpsDeploymentRepositoryCredential admission', () => {
  test('accepts https://, ssh:// and scp-style repositories', async () => {
    for (const repository of [
      'https://github.com/org/private',
      'https://github.com/org/private.git',
      'ssh://git@github.com/org/private.git',
      'ssh://git@gitlab.example.com:2222/group/sub/repo.git',
      'git@github.com:org/private.git',
      'git@gitlab.example.com:/srv/repos/repo.git',
    ]) {
      const stored = await expectAccepted(Kind.GitOpsDeploymentRepositoryCredential, {
        repository,
        secret: 'private-repo-creds',
      });
      assert.deepEqual(stored.spec, { repository, secret: 'private-repo-creds' });
    }
  });

  test('accepts the doc alias url instead of repository', async () => {
    const stored = await expectAccepted(Kind.GitOpsDeploymentRepositoryCredential, {
      url: 'https://github.com/org/private',
      secret: 'private-repo-creds',
    });
    assert.deepEqual(stored.spec, { url: 'https://github.com/org/private', secret: 'private-repo-creds' });
  });

  test('accepts an empty secret name (the controller reports SecretNotSpecified)', async () => {
    await expectAccepted(Kind.GitOpsDeploymentRepositoryCredential, {
      repository: 'https://github.com/org/private',
      secret: '',
    });
  });

  test('rejects other repositories with "repository must begin with ssh:// or https://", under either field name', async () => {
    for (const repository of [
      'http://github.com/org/private',
      'file:///srv/repo.git',
      'github.com/org/private',
      'git@github.com',
      'git@github.com:',
      'https://',
      '',
    ]) {
      for (const field of ['repository', 'url']) {
        await expectRejected(
          Kind.GitOpsDeploymentRepositoryCredential,
          { [field]: repository, secret: 's' },
          'repository must begin with ssh:// or https://',
        );
      }
    }
  });

  test('accepts a Helm repository (type helm, http:// or https://) and an OCI registry (type oci, oci://); git is the default type', async () => {
    for (const spec of [
      { repository: 'https://charts.example.com/stable', type: 'helm', secret: 's' },
      { url: 'http://charts.example.com', type: 'helm', secret: 's' },
      { repository: 'oci://registry.example.com/charts/nginx', type: 'oci', secret: 's' },
      { repository: 'https://github.com/org/private', type: 'git', secret: 's' },
    ]) {
      assert.deepEqual((await expectAccepted(Kind.GitOpsDeploymentRepositoryCredential, spec)).spec, spec);
    }
  });

  test('rejects a type other than git, helm or oci, and a repository that is not of its type', async () => {
    const cases: [Spec, string][] = [
      [
        { repository: 'https://charts.example.com', type: 'Helm', secret: 's' },
        'spec.type must be git, helm or oci',
      ],
      [
        { repository: 'ssh://git@git.example.com/charts.git', type: 'helm', secret: 's' },
        'a repository of type helm is a Helm repository, so it must begin with https:// or http://',
      ],
      [
        { repository: 'https://registry.example.com/charts', type: 'oci', secret: 's' },
        'a repository of type oci is an OCI registry, so it must begin with oci://',
      ],
      [
        { repository: 'oci://registry.example.com/charts', secret: 's' },
        'repository must begin with ssh:// or https://',
      ],
      [
        { url: 'oci://registry.example.com/charts', type: 'git', secret: 's' },
        'repository must begin with ssh:// or https://',
      ],
    ];
    for (const [spec, message] of cases) {
      await expectRejected(Kind.GitOpsDeploymentRepositoryCredential, spec, message);
    }
  });

  test('requires exactly one of repository and url', async () => {
    const message = 'exactly one of spec.repository and spec.url must be set';
    await expectRejected(Kind.GitOpsDeploymentRepositoryCredential, { secret: 's' }, message);
    await expectRejected(
      Kind.GitOpsDeploymentRepositoryCredential,
      { repository: 'https://github.com/org/a', url: 'https://github.com/org/a', secret: 's' },
      message,
    );
  });

  test('requires secret', async () => {
    await expectRejected(
      Kind.GitOpsDeploymentRepositoryCredential,
      { repository: 'https://github.com/org/a' },
      'spec.secret: Required value',
    );
  });

  test('stores the three conditions in order through /status', async () => {
    const name = nameOf(
      await expectAccepted(Kind.GitOpsDeploymentRepositoryCredential, {
        repository: 'https://github.com/org/a',
        secret: 's',
      }),
    );
    const at = '2026-01-01T00:00:00Z';
    const conditions = [
      {
        type: 'ErrorOccurred',
        status: 'False',
        reason: 'RepositoryCredentialUpToDate',
        message: 'RepositoryCredentials are Valid',
        lastTransitionTime: at,
      },
      {
        type: 'ValidRepositoryURL',
        status: 'True',
        reason: 'ValidRepositoryUrl',
        message: 'Repository https://github.com/org/a exists',
        lastTransitionTime: at,
      },
      {
        type: 'ValidRepositoryCredential',
        status: 'True',
        reason: 'RepositoryCredentialUpToDate',
        message: '',
        lastTransitionTime: at,
      },
    ];
    await expectStatusStored(Kind.GitOpsDeploymentRepositoryCredential, name, { conditions });
  });
});

// ---------------------------------------------------------------------------------------------------
// Operation

describe('Operation admission', () => {
  test('accepts an Operation pointing at an operation row', async () => {
    const stored = await expectAccepted(Kind.Operation, { operationID: '42' });
    assert.deepEqual(stored.spec, { operationID: '42' });
  });

  test('rejects an Operation without an operationID', async () => {
    await expectRejected(Kind.Operation, {}, 'spec.operationID: Required value');
    await expectRejected(Kind.Operation, { operationID: '' }, 'spec.operationID');
  });
});

// ---------------------------------------------------------------------------------------------------
// GitOpsEngineInstance (cluster-scoped)

describe('GitOpsEngineInstance admission', () => {
  const path = `/apis/${API_GROUP_VERSION}/${Plural.GitOpsEngineInstance}`;
  const created: string[] = [];
  afterAll(async () => {
    for (const name of created) await call(endpoint, 'DELETE', `${path}/${name}`);
  });
  const create = async (body: Obj): Promise<Response> => {
    objectCount += 1;
    const name = `${namespace}-${objectCount}`;
    created.push(name);
    return await call(endpoint, 'POST', path, {
      apiVersion: API_GROUP_VERSION,
      kind: Kind.GitOpsEngineInstance,
      metadata: { name },
      ...body,
    });
  };

  test('accepts one without a spec and reads spec.cordoned and spec.drain back false; a boolean cordoned is kept', async () => {
    const bare = await create({});
    assert.equal(bare.status, 201, String(bare.body.message));
    assert.deepEqual(bare.body.spec, { cordoned: false, drain: false });
    assert.equal((bare.body.metadata as { namespace?: string }).namespace, undefined, 'cluster-scoped');
    const cordoned = await create({ spec: { cordoned: true } });
    assert.equal(cordoned.status, 201, String(cordoned.body.message));
    assert.deepEqual(cordoned.body.spec, { cordoned: true, drain: false });
  });

  test('rejects a spec.cordoned or spec.drain that is not a boolean', async () => {
    assertInvalid(await create({ spec: { cordoned: 'yes' } }), 'spec.cordoned', 'cordoned: "yes"');
    assertInvalid(await create({ spec: { drain: 1 } }), 'spec.drain', 'drain: 1');
  });

  test('kubectl get gitopsengineinstances shows namespace, cluster, agents, availability, load and cordon from status', async () => {
    const res = await create({});
    assert.equal(res.status, 201, String(res.body.message));
    const name = nameOf(res.body);
    const status = {
      observedGeneration: 1,
      argoCDNamespace: 'argocd-a',
      cluster: 'cluster-uid',
      agents: 2,
      tenants: 3,
      applications: 7,
      cordoned: true,
      conditions: [
        {
          type: 'Available',
          status: 'True',
          reason: 'AgentListening',
          message: 'listening',
          lastTransitionTime: '2026-01-01T00:00:00Z',
        },
      ],
    };
    const patched = await call(
      endpoint,
      'PATCH',
      `${path}/${name}/status`,
      { status },
      'application/merge-patch+json',
    );
    assert.equal(patched.status, 200, String(patched.body.message));
    assert.deepEqual(patched.body.status, status);
    const table = await call(
      endpoint,
      'GET',
      `${path}/${name}`,
      undefined,
      undefined,
      'application/json;as=Table;v=v1;g=meta.k8s.io',
    );
    assert.equal(table.status, 200, String(table.body.message));
    const columns = (table.body.columnDefinitions as { name: string; priority: number }[])
      .filter((c) => c.priority === 0)
      .map((c) => c.name);
    assert.deepEqual(columns, [
      'Name',
      'Namespace',
      'Cluster',
      'Agents',
      'Available',
      'Tenants',
      'Applications',
      'Cordoned',
      'Age',
    ]);
    const cells = (table.body.rows as { cells: unknown[] }[])[0]?.cells ?? [];
    assert.deepEqual(cells.slice(0, 8), [name, 'argocd-a', 'cluster-uid', 2, 'True', 3, 7, true]);
  });
});

// ---------------------------------------------------------------------------------------------------
// What kubectl shows

describe('kubectl view of the API', () => {
  test('discovery lists every kind (namespaced but GitOpsEngineInstance) with a status subresource and its short names', async () => {
    const res = await call(endpoint, 'GET', `/apis/${API_GROUP}/${API_VERSION}`);
    assert.equal(res.status, 200, String(res.body.message));
    const resources = res.body.resources as {
      name: string;
      kind: string;
      namespaced: boolean;
      shortNames?: string[];
      categories?: string[];
    }[];
    for (const crd of await loadCrds()) {
      const { kind, plural, shortNames } = crd.spec.names;
      const resource = resources.find((r) => r.name === plural);
      assert.ok(resource, `${plural} is served`);
      assert.equal(resource.kind, kind);
      assert.equal(resource.namespaced, Kinds[kind as Kind].namespaced, `${kind} scope`);
      assert.deepEqual(resource.shortNames, shortNames);
      assert.ok(
        resources.some((r) => r.name === `${plural}/status`),
        `${plural}/status subresource is served`,
      );
    }
    const shortNamesOf = (kind: Kind) => resources.find((r) => r.kind === kind)?.shortNames ?? [];
    assert.ok(shortNamesOf(Kind.GitOpsDeployment).includes('gd'));
    assert.ok(shortNamesOf(Kind.GitOpsDeployment).includes('gitopsdepl'));
    assert.ok(shortNamesOf(Kind.GitOpsDeploymentSyncRun).includes('gdsr'));
    assert.ok(shortNamesOf(Kind.GitOpsDeploymentManagedEnvironment).includes('gdme'));
    assert.ok(shortNamesOf(Kind.GitOpsDeploymentRepositoryCredential).includes('gdrc'));
    assert.ok(shortNamesOf(Kind.Operation).includes('op'));
    assert.ok(shortNamesOf(Kind.GitOpsEngineInstance).includes('gei'));
  });

  test('kubectl get gitopsdeployments shows Name, Sync, Health and Age with the values from status', async () => {
    const name = nameOf(await expectAccepted(Kind.GitOpsDeployment, { source, type: 'automated' }));
    const patched = await patchStatus(Kind.GitOpsDeployment, name, {
      sync: { status: 'Synced', revision: 'abc' },
      health: { status: 'Healthy' },
    });
    assert.equal(patched.status, 200, String(patched.body.message));
    const table = await call(
      endpoint,
      'GET',
      objectPath(Kind.GitOpsDeployment, name),
      undefined,
      undefined,
      'application/json;as=Table;v=v1;g=meta.k8s.io',
    );
    assert.equal(table.status, 200, String(table.body.message));
    const columns = (table.body.columnDefinitions as { name: string; priority: number }[]).filter(
      (c) => c.priority === 0,
    );
    assert.deepEqual(
      columns.map((c) => c.name),
      ['Name', 'Sync', 'Health', 'Age'],
    );
    const cells = (table.body.rows as { cells: unknown[] }[])[0]?.cells ?? [];
    assert.deepEqual(cells.slice(0, 3), [name, 'Synced', 'Healthy']);
  });
});
