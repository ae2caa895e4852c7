/**
 * Integration-test fixture: the App Studio features run alone (no database, no backend) against the test
 * run's real API server, on a shard of their own (label `managed-gitops.redhat.com/backend-shard`), so test
 * files running at the same time never serve each other's objects. The test plays the component service
 * (writing a binding's `status.components`) and the core (writing a GitOpsDeployment's `status`).
 */
import { createWriteStream } from 'node:fs';
import { AppStudioKinds, CoreKinds, describeKind, type KindDescriptor, Kinds } from '@gitops/api';
import {
  collectionPath,
  createEventRecorder,
  createFeatureSet,
  createLogger,
  createMetricsRegistry,
  type Feature,
  type FeatureSet,
  getPathIfExists,
  HttpMethod,
  isNotFound,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  type LogLevel,
  loadKubeConfig,
  type WorkQueue,
} from '@gitops/shared';
import { eventually, listEvents, randomSuffix } from '@gitops/shared/testing';
import { type AppStudioFeatures, type AppStudioOptions, createAppStudioFeatures } from '../index.ts';

export const SHARD_LABEL = 'managed-gitops.redhat.com/backend-shard';

/** An object's spec, empty when it has none (for a test to read its fields). */
export const specOf = (o: KubeObject | undefined) => (o?.spec ?? {}) as Record<string, unknown>;
/** An object's status, empty when it has none. */
export const statusOf = (o: KubeObject | undefined) => (o?.status ?? {}) as Record<string, unknown>;

/** An object's conditions as type, status, reason and message (what the tests compare; times left out). */
export const conditionsOf = (o: KubeObject | undefined) =>
  (
    (
      o?.status as
        | { conditions?: { type: string; status: string; reason: string; message: string }[] }
        | undefined
    )?.conditions ?? []
  ).map(({ type, status, reason, message }) => ({ type, status, reason, message }));

/** The conditions (as `conditionsOf` gives them) of an Environment or binding that failed with `reason`. */
export const errorPair = (reason: string, message: string) => [
  { type: 'ErrorOccurred', status: 'True', reason: 'ErrorOccurred', message },
  { type: 'Reconciled', status: 'False', reason, message },
];

/** An object's ErrorOccurred condition as status, reason and message, if it has one. */
export const errorOf = (o: KubeObject | undefined) => {
  const c = conditionsOf(o).find((x) => x.type === 'ErrorOccurred');
  return c ? { status: c.status, reason: c.reason, message: c.message } : undefined;
};

export interface AppStudioFixture {
  readonly kc: KubeConfig;
  readonly shard: string;
  /** Labels every object the test creates for the features carries (the shard). */
  readonly labels: Record<string, string>;
  /** Starts the features (`only`: just the features of these names, e.g. `appstudio-environment`). */
  start(
    options?: Partial<AppStudioOptions>,
    select?: { only?: readonly string[] },
  ): Promise<AppStudioFeatures>;
  stop(): Promise<void>;
  /**
   * Resolves once every started controller whose cache holds `object` holds it at this resourceVersion or a
   * later one, and then no key is queued or being reconciled: a check that something did NOT happen after
   * a write waits for this first, so the write has been looked at.
   */
  settledAfter(object: KubeObject): Promise<void>;
  createNamespace(prefix?: string): Promise<string>;
  /**
   * Creates the namespace `name` itself, which the test deletes (objects of its own in there may need their
   * finalizers removed first); `createNamespace` makes one of a random name, deleted at cleanup.
   */
  createNamespaceNamed(name: string): Promise<void>;
  create(
    kind: KindDescriptor,
    namespace: string,
    name: string,
    body: Record<string, unknown>,
  ): Promise<KubeObject>;
  get(kind: KindDescriptor, namespace: string, name: string): Promise<KubeObject | undefined>;
  /** The object's conditions (`conditionsOf`) once it has any; `what` names the wait. */
  conditionsOnceSet(
    what: string,
    kind: KindDescriptor,
    namespace: string,
    name: string,
  ): Promise<ReturnType<typeof conditionsOf>>;
  list(kind: KindDescriptor, namespace: string): Promise<KubeObject[]>;
  /** JSON merge patch of the object (or of its `status` when `subresource` is `status`). */
  patch(
    kind: KindDescriptor,
    namespace: string,
    name: string,
    patch: unknown,
    subresource?: 'status',
  ): Promise<KubeObject>;
  remove(kind: KindDescriptor, namespace: string, name: string): Promise<void>;
  events(
    namespace: string,
    involvedName: string,
  ): Promise<{ reason: string; message: string; type: string }[]>;
  /** A cluster-scoped DeploymentTargetClass (a unique name per test; deleted by cleanup). */
  createClass(name: string, spec: Record<string, unknown>): Promise<KubeObject>;
  cleanup(): Promise<void>;
}

const objectPath = (kind: KindDescriptor, namespace: string, name?: string) =>
  `${collectionPath({ ...kind.resource, namespace })}${name ? `/${encodeURIComponent(name)}` : ''}`;

export function createAppStudioFixture(): AppStudioFixture {
  const kc = loadKubeConfig(process.env.KUBECONFIG);
  const shard = `appstudio-${randomSuffix()}`;
  const labels = { [SHARD_LABEL]: shard };
  const namespaces: string[] = [];
  const classes: string[] = [];
  const classPath = (name?: string) =>
    `${collectionPath(AppStudioKinds.DeploymentTargetClass.resource)}${name ? `/${name}` : ''}`;
  let featureSet: FeatureSet | undefined;
  /** The started features, and those with a work queue. */
  let started: readonly Feature[] = [];
  let queues: WorkQueue[] = [];

  const fixture: AppStudioFixture = {
    kc,
    shard,
    labels,
    async start(options = {}, select = {}) {
      const logger = createLogger({
        name: 'appstudio-test',
        level: (process.env.APPSTUDIO_TEST_LOG_LEVEL ?? 'silent') as LogLevel,
        // APPSTUDIO_TEST_LOG_FILE: the features' log in a file (vitest does not show a worker's fd 1).
        ...(process.env.APPSTUDIO_TEST_LOG_FILE
          ? { destination: createWriteStream(process.env.APPSTUDIO_TEST_LOG_FILE, { flags: 'a' }) }
          : {}),
      });
      const features = createAppStudioFeatures({
        kc,
        registry: createMetricsRegistry({ defaultMetrics: false }),
        logger,
        events: createEventRecorder(kc, { component: 'gitops-appstudio-test', logger }),
        labelSelector: `${SHARD_LABEL}=${shard}`,
        shardLabels: labels,
        resyncIntervalMs: 10 * 60_000,
        concurrency: 2,
        devSandbox: true,
        ...options,
      });
      const chosen = select.only
        ? features.features.filter((feature) => select.only?.includes(feature.name))
        : features.features;
      started = chosen;
      queues = chosen.flatMap((feature) => ('queue' in feature ? [feature.queue as WorkQueue] : []));
      featureSet = createFeatureSet(chosen, { logger });
      featureSet.startInformers();
      if (!(await featureSet.waitForSync())) throw new Error('an informer stopped before it synced');
      featureSet.start();
      return features;
    },
    async stop() {
      await featureSet?.stop();
      featureSet = undefined;
      started = [];
      queues = [];
    },
    async settledAfter(object) {
      const { namespace, name, uid, resourceVersion = '0' } = object.metadata;
      const atLeast = (cached: KubeObject) =>
        BigInt(cached.metadata.resourceVersion ?? '0') >= BigInt(resourceVersion);
      const caches = [...new Set(started.flatMap((feature) => feature.informers))];
      await eventually(`${name} at resourceVersion ${resourceVersion} in the controllers' caches`, () => {
        const holding = caches
          .map((cache) => cache.get(namespace, name))
          .filter((cached) => cached?.metadata.uid === uid);
        return holding.length > 0 && holding.every((cached) => cached && atLeast(cached)) ? true : undefined;
      });
      for (const queue of queues) await queue.whenIdle();
    },
    async createNamespace(prefix = 'appstudio') {
      const name = `${prefix}-${randomSuffix()}`;
      await fixture.createNamespaceNamed(name);
      namespaces.push(name);
      return name;
    },
    async createNamespaceNamed(name) {
      await kubeRequest(kc, {
        method: HttpMethod.POST,
        path: '/api/v1/namespaces',
        body: { metadata: { name } },
      });
    },
    async create(kind, namespace, name, body) {
      const { metadata = {}, ...rest } = body as { metadata?: Record<string, unknown> };
      return (await kubeRequest(kc, {
        method: HttpMethod.POST,
        path: objectPath(kind, namespace),
        body: {
          apiVersion: kind.apiVersion,
          kind: kind.kind,
          ...rest,
          metadata: {
            ...metadata,
            name,
            namespace,
            labels: { ...labels, ...((metadata.labels as object) ?? {}) },
          },
        },
      })) as KubeObject;
    },
    conditionsOnceSet: (what, kind, namespace, name) =>
      eventually(what, async () => {
        const conditions = conditionsOf(await fixture.get(kind, namespace, name));
        return conditions.length > 0 ? conditions : undefined;
      }),
    async get(kind, namespace, name) {
      return (await getPathIfExists(kc, objectPath(kind, namespace, name))) as KubeObject | undefined;
    },
    async list(kind, namespace) {
      const answer = (await kubeRequest(kc, {
        method: HttpMethod.GET,
        path: objectPath(kind, namespace),
      })) as {
        items: KubeObject[];
      };
      return answer.items;
    },
    async patch(kind, namespace, name, patch, subresource) {
      return (await kubeRequest(kc, {
        method: HttpMethod.PATCH,
        path: `${objectPath(kind, namespace, name)}${subresource ? `/${subresource}` : ''}`,
        body: patch,
        contentType: 'application/merge-patch+json',
      })) as KubeObject;
    },
    async remove(kind, namespace, name) {
      try {
        await kubeRequest(kc, { method: HttpMethod.DELETE, path: objectPath(kind, namespace, name) });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    },
    events: (namespace, involvedName) => listEvents(kc, namespace, { name: involvedName }),
    async createClass(name, spec) {
      classes.push(name);
      return (await kubeRequest(kc, {
        method: HttpMethod.POST,
        path: classPath(),
        body: {
          apiVersion: AppStudioKinds.DeploymentTargetClass.apiVersion,
          kind: AppStudioKinds.DeploymentTargetClass.kind,
          metadata: { name },
          spec,
        },
      })) as KubeObject;
    },
    async cleanup() {
      await fixture.stop();
      for (const name of classes)
        await kubeRequest(kc, { method: HttpMethod.DELETE, path: classPath(name) }).catch(() => {});
      // Claims, targets and SpaceRequests keep finalizers that only the stopped features would remove.
      for (const name of namespaces)
        for (const kind of [
          AppStudioKinds.DeploymentTargetClaim,
          AppStudioKinds.DeploymentTarget,
          AppStudioKinds.SpaceRequest,
        ])
          for (const o of await fixture.list(kind, name).catch(() => []))
            if ((o.metadata.finalizers ?? []).length > 0)
              await fixture
                .patch(kind, name, o.metadata.name, { metadata: { finalizers: null } })
                .catch(() => {});
      for (const name of namespaces) {
        await kubeRequest(kc, { method: HttpMethod.DELETE, path: `/api/v1/namespaces/${name}` }).catch(
          () => {},
        );
      }
    },
  };
  return fixture;
}

/** Every kind a test touches. */
export const Kind = {
  ...AppStudioKinds,
  ...Kinds,
  Secret: CoreKinds.Secret,
  ConfigMap: describeKind({ group: '', version: 'v1', kind: 'ConfigMap', plural: 'configmaps' }),
} as const;
