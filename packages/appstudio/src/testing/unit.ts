/**
 * Unit-test support (no API server): plain App Studio objects, and a controller wired with the real
 * predicates and watches of a feature around a reconcile that only records its keys, fed by hand-fed
 * informers (`handInformer`): an event in, the keys it wakes out.
 */
import assert from 'node:assert/strict';
import { AppStudioKinds, DeploymentTargetAnnotation } from '@gitops/api';
import {
  type ControllerBuilder,
  createMetricsRegistry,
  createSilentLogger,
  type ForOptions,
  type Informer,
  KubeConfig,
  type KubeObject,
  newController,
  objectKey,
} from '@gitops/shared';
import { type HandInformer, handInformer, recordingController } from '@gitops/shared/testing';
import { afterEach, beforeEach } from 'vitest';
import type {
  ApplicationCr,
  BindingCr,
  ClaimCr,
  ClassCr,
  EnvironmentCr,
  PromotionRunCr,
  TargetCr,
} from '../objects.ts';

export const NS = 'ns';

type Meta = Partial<KubeObject['metadata']>;

const typeOf = (kind: { apiVersion: string; kind: string }) => ({
  apiVersion: kind.apiVersion,
  kind: kind.kind,
});

const metadata = (name: string, meta: Meta = {}) => ({
  name,
  namespace: NS,
  uid: `uid-${name}`,
  resourceVersion: '1',
  generation: 1,
  ...meta,
});

/** An object of `kind` named `name` (in NS unless `meta` says otherwise) with its `spec` and `status`. */
const withStatus = <T>(
  kind: { apiVersion: string; kind: string },
  name: string,
  meta: Meta,
  spec: object,
  status: unknown,
): T => ({ ...typeOf(kind), metadata: metadata(name, meta), spec, status }) as T;

export function environment(
  name: string,
  spec: Partial<NonNullable<EnvironmentCr['spec']>> = {},
  meta: Meta = {},
): EnvironmentCr {
  return {
    ...typeOf(AppStudioKinds.Environment),
    metadata: metadata(name, meta),
    spec: { displayName: name, deploymentStrategy: 'Manual', ...spec },
  } as EnvironmentCr;
}

/** An Environment deploying to the target bound to the claim `claimName`. */
export const claimedEnvironment = (name: string, claimName: string, meta: Meta = {}): EnvironmentCr =>
  environment(name, { configuration: { target: { deploymentTargetClaim: { claimName } } } }, meta);

/** The credentials of an Environment's `unstableConfigurationFields` (the Secret `creds`, namespace `apps`). */
export const CREDENTIALS = {
  targetNamespace: 'apps',
  apiURL: 'https://c.example',
  clusterCredentialsSecret: 'creds',
  allowInsecureSkipTLSVerify: false,
};

/** An Environment deploying with credentials (`CREDENTIALS` with `overrides`). */
export const credentialsEnvironment = (
  name: string,
  overrides: Partial<typeof CREDENTIALS> & { namespaces?: string[] } = {},
): EnvironmentCr =>
  environment(name, {
    unstableConfigurationFields: { kubernetesCredentials: { ...CREDENTIALS, ...overrides } },
  });

export function claim(
  name: string,
  spec: Partial<ClaimCr['spec']> = {},
  status: ClaimCr['status'] = {},
  meta: Meta = {},
): ClaimCr {
  return withStatus(
    AppStudioKinds.DeploymentTargetClaim,
    name,
    meta,
    { deploymentTargetClassName: 'class', ...spec },
    status,
  );
}

/** A claim bound to the target `targetName` (Bound, bind-complete). */
export const boundClaim = (name: string, targetName: string): ClaimCr =>
  claim(
    name,
    { targetName },
    { phase: 'Bound' },
    { annotations: { [DeploymentTargetAnnotation.BindComplete]: 'true' } },
  );

export function target(
  name: string,
  spec: Partial<TargetCr['spec']> = {},
  status: TargetCr['status'] = {},
  meta: Meta = {},
): TargetCr {
  const credentials = {
    defaultNamespace: `${name}-ns`,
    apiURL: 'https://cluster.example:6443',
    clusterCredentialsSecret: `${name}-secret`,
    allowInsecureSkipTLSVerify: false,
  };
  return withStatus(
    AppStudioKinds.DeploymentTarget,
    name,
    meta,
    { deploymentTargetClassName: 'class', kubernetesCredentials: credentials, ...spec },
    status,
  );
}

export function deploymentTargetClass(name: string, spec: Partial<ClassCr['spec']> = {}): ClassCr {
  return {
    ...typeOf(AppStudioKinds.DeploymentTargetClass),
    metadata: { name, uid: `uid-${name}`, resourceVersion: '1', generation: 1 },
    spec: { provisioner: 'example.com/provisioner', reclaimPolicy: 'Delete', ...spec },
  } as ClassCr;
}

export function binding(
  name: string,
  spec: Partial<BindingCr['spec']> = {},
  status: BindingCr['status'] = {},
  meta: Meta = {},
): BindingCr {
  const defaults = {
    application: 'app',
    environment: 'dev',
    snapshot: 'snap-1',
    components: [{ name: 'web' }],
  };
  return withStatus(AppStudioKinds.SnapshotEnvironmentBinding, name, meta, { ...defaults, ...spec }, status);
}

export function promotionRun(
  name: string,
  spec: Partial<NonNullable<PromotionRunCr['spec']>> = {},
  status: PromotionRunCr['status'] = {},
  meta: Meta = {},
): PromotionRunCr {
  const defaults = { application: 'app', snapshot: 'snap-1', manualPromotion: { targetEnvironment: 'dev' } };
  return withStatus(AppStudioKinds.PromotionRun, name, meta, { ...defaults, ...spec }, status);
}

export function application(name: string, meta: Meta = {}): ApplicationCr {
  return {
    ...typeOf(AppStudioKinds.Application),
    metadata: metadata(name, meta),
    spec: { displayName: name },
  } as ApplicationCr;
}

/** Any other object (a Secret, a ManagedEnvironment, a SpaceRequest, ...). */
export function object(name: string, fields: Record<string, unknown> = {}, meta: Meta = {}): KubeObject {
  return { metadata: metadata(name, meta), ...fields };
}

/** An ownerReference to `owner`, an object of `kind` (its controller unless `controller` is false). */
export const ownerRefTo = (
  kind: { apiVersion: string; kind: string },
  owner: KubeObject,
  controller = true,
) => ({
  apiVersion: kind.apiVersion,
  kind: kind.kind,
  name: owner.metadata.name,
  uid: owner.metadata.uid ?? '',
  controller,
});

/** The same object at a new resourceVersion (and generation, when `spec` is given: a spec change). */
export function updated<T extends KubeObject>(
  o: T,
  change: Omit<Partial<T>, 'metadata'> & { metadata?: Meta },
): T {
  const resourceVersion = String(Number(o.metadata.resourceVersion ?? '0') + 1);
  const generation = (o.metadata.generation ?? 1) + ('spec' in change ? 1 : 0);
  return {
    ...o,
    ...change,
    metadata: { ...o.metadata, resourceVersion, generation, ...change.metadata },
  };
}

/**
 * A controller of `primary` built as the feature builds it (`forOptions`, then `sources` adds its watches)
 * around a reconcile that records its keys; started. `wakes(event)` answers the keys one event woke.
 */
export function wiredController<T extends KubeObject>(
  primary: Informer<T>,
  forOptions: ForOptions<T>,
  sources: (builder: ControllerBuilder<KubeObject>) => ControllerBuilder<KubeObject> = (b) => b,
) {
  const recorder = recordingController((reconcile) =>
    sources(
      newController('under-test', {
        registry: createMetricsRegistry({ defaultMetrics: false }),
        logger: createSilentLogger(),
      }).for(primary as unknown as Informer<KubeObject>, forOptions as ForOptions<KubeObject>),
    ).complete(reconcile),
  );
  recorder.controller.start();
  return { wakes: recorder.wakes, stop: () => recorder.controller.stop() };
}

/** An EventRecorder that keeps what it was asked to record. */
export function recordedEvents() {
  const events: { name: string; type: string; reason: string; message: string }[] = [];
  return {
    events,
    recorder: {
      event: async (involved: KubeObject, type: string, reason: string, message: string) => {
        events.push({ name: involved.metadata.name, type, reason, message });
      },
    },
  };
}

/** A silent logger for steps that take one. */
export const quietLogger = createSilentLogger();

/** A KubeConfig without a cluster: a step that calls the API server with it throws. */
export const noApiServer = (): KubeConfig => new KubeConfig();

/** A cache over `objects` (what a step reads through `get` and `list`). */
export function cacheOf<T extends KubeObject>(...objects: T[]): Pick<Informer<T>, 'get' | 'list'> {
  return {
    get: (namespace, name) =>
      objects.find((o) => o.metadata.name === name && o.metadata.namespace === namespace),
    list: (namespace) => objects.filter((o) => namespace === undefined || o.metadata.namespace === namespace),
  };
}

/** The object type an informer holds. */
type ObjectOf<I> = I extends Informer<infer T> ? T : never;

/** Hand-fed informers by the names of a feature's watch deps `D` (each of the object type its informer holds). */
export type HandSources<D> = { [K in keyof D]-?: HandInformer<ObjectOf<NonNullable<D[K]>>> };

/**
 * A watches test's setup: before each test, a fresh hand-fed informer for each of `sources` (the names of
 * the feature's watch deps `D`, its primary first) and the controller built as the feature builds it
 * (`wiredController`: `forOptions` on the primary, then `watches` over the informers); stopped after each.
 * `sources` are the informers the test feeds, `wakes(event)` answers the keys one event woke.
 */
export function useWatches<D extends object>(
  sources: readonly (keyof D & string)[],
  forOptions: ForOptions<KubeObject>,
  watches: (builder: ControllerBuilder<KubeObject>, deps: D) => ControllerBuilder<KubeObject>,
) {
  const state = {
    sources: {} as HandSources<D>,
    controller: undefined as ReturnType<typeof wiredController> | undefined,
    wakes: (event: () => void): Promise<string[]> => {
      if (!state.controller) throw new Error('useWatches: no controller (outside a test?)');
      return state.controller.wakes(event);
    },
  };
  beforeEach(() => {
    const hand = sources.map((name) => [name, handInformer()] as const);
    state.sources = Object.fromEntries(hand) as HandSources<D>;
    const deps = Object.fromEntries(hand.map(([name, source]) => [name, source.informer])) as D;
    const primary = hand[0]?.[1].informer;
    if (!primary) throw new Error('useWatches: no sources');
    state.controller = wiredController(primary, forOptions, (b) => watches(b, deps));
  });
  afterEach(() => state.controller?.stop());
  return state;
}

/** The object marked for deletion (its `deletionTimestamp` set): a change that wakes its own controller. */
export const deleting = <T extends KubeObject>(o: T): T => {
  // Only metadata changes; TypeScript cannot tell that `{ metadata }` alone fits every T's change.
  const change = { metadata: { deletionTimestamp: '2026-01-01T00:00:00Z' } };
  return updated(o, change as Parameters<typeof updated<T>>[1]);
};

/**
 * A watches test of the primary's own events, in order: `created` put wakes it; its own status write
 * (`ownWrite`, applied with `updated`) wakes nothing; the same object again (a relist) wakes it; each of
 * `changes` (made from the object before it) wakes it; and, with `removed`, its delete event wakes it.
 */
export async function assertOwnEvents<T extends KubeObject>(
  watch: { wakes: (event: () => void) => Promise<string[]> },
  source: HandInformer<T>,
  created: T,
  steps: { ownWrite: Omit<Partial<T>, 'metadata'>; changes: ((previous: T) => T)[]; removed: boolean },
): Promise<void> {
  const key = objectKey(created);
  assert.deepEqual(await watch.wakes(() => source.put(created)), [key], 'created');
  let current = updated(created, steps.ownWrite);
  assert.deepEqual(await watch.wakes(() => source.put(current)), [], 'its own status write');
  assert.deepEqual(await watch.wakes(() => source.put(current)), [key], 'relist');
  for (const [i, change] of steps.changes.entries()) {
    const next = change(current);
    current = next;
    assert.deepEqual(await watch.wakes(() => source.put(next)), [key], `change ${i + 1}`);
  }
  if (steps.removed) {
    const last = current;
    assert.deepEqual(await watch.wakes(() => source.remove(last)), [key], 'removed');
  }
}
