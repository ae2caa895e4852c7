/**
 * Integration-test fixture: the test run's real API server (KUBECONFIG), a namespace of its own, the local
 * cloud services API (packages/local-env) on a free port, and a RHOAS operator built in-process that
 * watches only that namespace (RHOAS_WATCH_NAMESPACE), with short retry delays and request timeout. Its log
 * lines are kept in memory so tests can check that no secret is ever logged.
 */
import assert from 'node:assert/strict';
import { RHOAS_API_GROUP_VERSION, type RhoasCondition, type RhoasKind, RhoasPlural } from '@gitops/api';
import {
  type CloudServicesApi,
  type CloudServicesSeed,
  loadCloudServicesSeed,
  startCloudServicesApi,
} from '@gitops/local-env';
import {
  createLogger,
  createMemoryDestination,
  createMetricsRegistry,
  getPathIfExists,
  HttpMethod,
  isNotFound,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  loadKubeConfig,
} from '@gitops/shared';
import { eventually, listEvents, randomSuffix, useFixture } from '@gitops/shared/testing';
import { buildRhoasOperator, type RhoasOperator } from '../app.ts';
import { loadRhoasOperatorConfig } from '../config.ts';

/** The offline token the seed accepts. */
export const OFFLINE_TOKEN = 'local-offline-token';
export const TOKEN_SECRET = 'rh-cloud-services-accesstoken';
/** The service-account Secret `connectionSpec` names (a test file creates it, with values of its own). */
export const SA_SECRET = 'rh-cloud-services-service-account';

/**
 * A connection CR's spec: the instance it connects to (`kafkaId` of a KafkaConnection, `serviceRegistryId` of
 * a ServiceRegistryConnection), the access-token Secret and the service-account Secret `SA_SECRET`.
 */
export const connectionSpec = (idField: 'kafkaId' | 'serviceRegistryId', id: string | undefined) => ({
  [idField]: id,
  accessTokenSecretName: TOKEN_SECRET,
  credentials: { serviceAccountSecretName: SA_SECRET },
});

export { eventually };

export interface RhoasCr extends KubeObject {
  spec?: Record<string, unknown>;
  status?: Record<string, unknown> & { conditions?: RhoasCondition[] };
}

export interface RhoasFixture {
  readonly kc: KubeConfig;
  readonly namespace: string;
  readonly api: CloudServicesApi;
  readonly seed: CloudServicesSeed;
  operator: RhoasOperator;
  /** The operator's log output so far. */
  logText(): string;
  /**
   * Resolves when no CR of any kind is queued or being processed. A processing records its Event and log
   * line after the status write, so a check of Events or logs waits for this after seeing the status.
   */
  settled(): Promise<void>;
  /** Stops the operator and starts a new one (a restart), with extra environment. */
  restartOperator(env?: Record<string, string>): Promise<void>;
  createSecret(
    name: string,
    data: Record<string, string>,
    ownerReferences?: unknown[],
    extra?: { type?: string; finalizers?: string[] },
  ): Promise<KubeObject>;
  getSecret(
    name: string,
  ): Promise<(KubeObject & { data?: Record<string, string>; type?: string }) | undefined>;
  deleteSecret(name: string): Promise<void>;
  create(
    kind: RhoasKind,
    name: string,
    spec: Record<string, unknown> | undefined,
    labels?: Record<string, string>,
  ): Promise<RhoasCr>;
  get(kind: RhoasKind, name: string): Promise<RhoasCr | undefined>;
  /** JSON merge patch of the spec (bumps the generation). */
  patchSpec(kind: RhoasKind, name: string, spec: Record<string, unknown>): Promise<RhoasCr>;
  /** The console's re-trigger: `spec.forceRefresh = <now>`. */
  forceRefresh(kind: RhoasKind, name: string): Promise<RhoasCr>;
  delete(kind: RhoasKind, name: string): Promise<void>;
  /** Waits until the CR's Finished condition is for its current generation and has `status`. */
  waitFinished(kind: RhoasKind, name: string, status: 'True' | 'False'): Promise<RhoasCr>;
  /** Events of the namespace about `name`. */
  events(name: string): Promise<{ reason: string; message: string; type: string }[]>;
  cleanup(): Promise<void>;
}

const crPath = (namespace: string, kind: RhoasKind, name?: string) =>
  `/apis/${RHOAS_API_GROUP_VERSION}/namespaces/${namespace}/${RhoasPlural[kind]}${name ? `/${encodeURIComponent(name)}` : ''}`;

export function condition(cr: RhoasCr | undefined, type: string): RhoasCondition | undefined {
  return cr?.status?.conditions?.find((c) => c.type === type);
}

/** A Secret's `data`, each value decoded from base64. */
export const decode = (data: Record<string, string> | undefined) =>
  Object.fromEntries(
    Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
  );

/** The CR's conditions, each as the list of its `fields` in that order (for one deepEqual of them all). */
export function conditionFields(
  cr: RhoasCr | undefined,
  ...fields: (keyof RhoasCondition)[]
): unknown[][] | undefined {
  return cr?.status?.conditions?.map((c) => fields.map((field) => c[field]));
}

/**
 * Creates a CR of `kind` per case (all first, then waits) and checks that each finished False with the
 * operator's message naming the case's missing field; gives the finished CRs, in the cases' order, for the
 * checks of each kind.
 */
export async function finishedMissingArgument(
  f: RhoasFixture,
  kind: RhoasKind,
  cases: readonly (readonly [name: string, spec: Record<string, unknown> | undefined, field: string])[],
): Promise<RhoasCr[]> {
  for (const [name, spec] of cases) await f.create(kind, name, spec);
  const finished: RhoasCr[] = [];
  for (const [name, , field] of cases) {
    const cr = await f.waitFinished(kind, name, 'False');
    assert.equal(
      condition(cr, 'Finished')?.message,
      `Missing argument ${field} in CR, ${field} should not be null`,
    );
    finished.push(cr);
  }
  return finished;
}

export interface RhoasFixtureOptions {
  env?: Record<string, string>;
  /** The operator's credentials, made once the namespace exists (default: the test run's admin). */
  operatorKubeConfig?: (namespace: string) => Promise<KubeConfig>;
  /** Secrets to create (name → stringData) besides the access-token Secret every test file starts with. */
  secrets?: Record<string, Record<string, string>>;
}

/** The fixture of the enclosing test file or describe block: made before its tests, cleaned up after them. */
export const useRhoasFixture = (options: RhoasFixtureOptions = {}): RhoasFixture =>
  useFixture(
    () => createRhoasFixture(options),
    (f) => f.cleanup(),
  );

export async function createRhoasFixture(options: RhoasFixtureOptions = {}): Promise<RhoasFixture> {
  const kc = loadKubeConfig(process.env.KUBECONFIG);
  const namespace = `rhoas-${randomSuffix()}`;
  await kubeRequest(kc, {
    method: HttpMethod.POST,
    path: '/api/v1/namespaces',
    body: { metadata: { name: namespace } },
  });
  const operatorKc = options.operatorKubeConfig ? await options.operatorKubeConfig(namespace) : kc;
  const seed = await loadCloudServicesSeed();
  const api = await startCloudServicesApi({ seed });
  const destination = createMemoryDestination();
  const baseEnv = {
    KUBECONFIG: process.env.KUBECONFIG ?? '',
    CLOUD_SERVICES_API: api.url,
    CLOUD_SERVICES_SSO: api.ssoUrl,
    MAS_AUTH_URL: `${api.url}/auth`,
    MAS_AUTH_REALM: 'rhoas',
    RHOAS_WATCH_NAMESPACE: namespace,
    RHOAS_REQUEST_TIMEOUT: '1s',
    RHOAS_RETRY_INITIAL: '50ms',
    RHOAS_RETRY_MAX: '500ms',
    LOG_LEVEL: 'debug',
    ...options.env,
  };
  const build = (env: Record<string, string> = {}) =>
    buildRhoasOperator(loadRhoasOperatorConfig({ ...baseEnv, ...env }), {
      kubeConfig: operatorKc,
      logger: createLogger({ name: 'rhoas-operator', level: 'debug', destination }),
      registry: createMetricsRegistry(),
    });
  let operator = build();
  await operator.start();

  const fixture: RhoasFixture = {
    kc,
    namespace,
    api,
    seed,
    get operator() {
      return operator;
    },
    set operator(value) {
      operator = value;
    },
    logText: () => destination.text(),
    async settled() {
      for (const feature of Object.values(operator.features)) await feature.queue.whenIdle();
    },
    async restartOperator(env) {
      await operator.close();
      operator = build(env);
      await operator.start();
    },
    async createSecret(name, data, ownerReferences, extra = {}) {
      return (await kubeRequest(kc, {
        method: HttpMethod.POST,
        path: `/api/v1/namespaces/${namespace}/secrets`,
        body: {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: {
            name,
            namespace,
            ...(ownerReferences ? { ownerReferences } : {}),
            ...(extra.finalizers ? { finalizers: extra.finalizers } : {}),
          },
          ...(extra.type ? { type: extra.type } : {}),
          stringData: data,
        },
      })) as KubeObject;
    },
    async getSecret(name) {
      return (await getPathIfExists(kc, `/api/v1/namespaces/${namespace}/secrets/${name}`)) as
        | (KubeObject & { data?: Record<string, string> })
        | undefined;
    },
    async deleteSecret(name) {
      await kubeRequest(kc, {
        method: HttpMethod.DELETE,
        path: `/api/v1/namespaces/${namespace}/secrets/${name}`,
      }).catch((err: unknown) => {
        if (!isNotFound(err)) throw err;
      });
    },
    async create(kind, name, spec, labels) {
      return (await kubeRequest(kc, {
        method: HttpMethod.POST,
        path: crPath(namespace, kind),
        body: {
          apiVersion: RHOAS_API_GROUP_VERSION,
          kind,
          metadata: { name, namespace, ...(labels ? { labels } : {}) },
          ...(spec === undefined ? {} : { spec }),
        },
      })) as RhoasCr;
    },
    async get(kind, name) {
      return (await getPathIfExists(kc, crPath(namespace, kind, name))) as RhoasCr | undefined;
    },
    async patchSpec(kind, name, spec) {
      return (await kubeRequest(kc, {
        method: HttpMethod.PATCH,
        path: crPath(namespace, kind, name),
        body: { spec },
        contentType: 'application/merge-patch+json',
      })) as RhoasCr;
    },
    forceRefresh(kind, name) {
      return fixture.patchSpec(kind, name, { forceRefresh: new Date().toISOString() });
    },
    async delete(kind, name) {
      await kubeRequest(kc, { method: HttpMethod.DELETE, path: crPath(namespace, kind, name) });
    },
    waitFinished(kind, name, status) {
      return eventually(`${kind} ${name} Finished=${status}`, async () => {
        const cr = await fixture.get(kind, name);
        const finished = condition(cr, 'Finished');
        return finished?.status === status && finished.lastTransitionGeneration === cr?.metadata.generation
          ? cr
          : undefined;
      });
    },
    events: (name) => listEvents(kc, namespace, { name }),
    async cleanup() {
      await operator.close();
      await api.close();
      await kubeRequest(kc, { method: HttpMethod.DELETE, path: `/api/v1/namespaces/${namespace}` }).catch(
        () => undefined,
      );
    },
  };
  // The console's access-token Secret (TOKEN_SECRET holding OFFLINE_TOKEN), which every CR kind names.
  await fixture.createSecret(TOKEN_SECRET, { value: OFFLINE_TOKEN });
  for (const [name, data] of Object.entries(options.secrets ?? {})) await fixture.createSecret(name, data);
  return fixture;
}
