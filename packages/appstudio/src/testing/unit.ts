/**
 * Unit-test support (no API server): plain App Studio objects, and a controller wired with the real
 * predicates and watches of a feature around a reconcile that only records its keys, fed by hand-fed
 * informers (`handInformer`): an event in, the keys it wakes out.
 */
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
} from '@gitops/shared';
import { type HandInformer, recordingController } from '@gitops/shared/testing';
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
  return {
    ...typeOf(AppStudioKinds.DeploymentTargetClaim),
    metadata: metadata(name, meta),
    spec: { deploymentTargetClassName: 'class', ...spec },
    status,
  } as ClaimCr;
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
  return {
    ...typeOf(AppStudioKinds.DeploymentTarget),
    metadata: metadata(name, meta),
    spec: {
      deploymentTargetClassName: 'class',
      kubernetesCredentials: {
        defaultNamespace: `${name}-ns`,
        apiURL: 'https://cluster.example:6443',
        clusterCredentialsSecret: `${name}-secret`,
        allowInsecureSkipTLSVerify: false,
      },
      ...spec,
    },
    status,
  } as TargetCr;
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
  return {
    ...typeOf(AppStudioKinds.SnapshotEnvironmentBinding),
    metadata: metadata(name, meta),
    spec: {
      application: 'app',
      environment: 'dev',
      snapshot: 'snap-1',
      components: [{ name: 'web' }],
      ...spec,
    },
    status,
  } as BindingCr;
}

export function promotionRun(
  name: string,
  spec: Partial<NonNullable<PromotionRunCr['spec']>> = {},
  status: PromotionRunCr['status'] = {},
  meta: Meta = {},
): PromotionRunCr {
  return {
    ...typeOf(AppStudioKinds.PromotionRun),
    metadata: metadata(name, meta),
    spec: { application: 'app', snapshot: 'snap-1', manualPromotion: { targetEnvironment: 'dev' }, ...spec },
    status,
  } as PromotionRunCr;
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

/** The informers of hand-fed sources, by the same names (what a feature's deps take). */
export type InformersOf<S extends Record<string, HandInformer<KubeObject>>> = {
  [K in keyof S]: S[K]['informer'];
};

/**
 * A watches test's setup: before each test, fresh hand-fed `sources` (`given()`) and the controller `wire`
 * builds from their informers (with `wiredController`); stopped after each. `wakes(event)` answers the keys
 * one event woke.
 */
// biome-ignore lint/suspicious/noExplicitAny: any kind of object per source.
export function useWatches<S extends Record<string, HandInformer<any>>>(
  given: () => S,
  wire: (deps: InformersOf<S>) => ReturnType<typeof wiredController>,
) {
  const state = {
    sources: {} as S,
    controller: undefined as ReturnType<typeof wiredController> | undefined,
    wakes: (event: () => void): Promise<string[]> => {
      if (!state.controller) throw new Error('useWatches: no controller (outside a test?)');
      return state.controller.wakes(event);
    },
  };
  beforeEach(() => {
    state.sources = given();
    const deps = Object.fromEntries(
      Object.entries(state.sources).map(([name, source]) => [name, source.informer]),
    );
    state.controller = wire(deps as InformersOf<S>);
  });
  afterEach(() => state.controller?.stop());
  return state;
}
