/**
 * The App Studio CRDs' admission rules (the original's validating webhooks as CEL), against the real API
 * server of the test harness: reference scenarios of the webhook unit tables (Environment, Snapshot,
 * SnapshotEnvironmentBinding, PromotionRun) and of the webhook e2e suite, each with the original's message.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { APPSTUDIO_GROUP_VERSION, AppStudioKinds, type KindDescriptor } from '@gitops/api';
import {
  collectionPath,
  HttpMethod,
  KubeApiError,
  type KubeObject,
  kubeRequest,
  loadKubeConfig,
} from '@gitops/shared';
import { useNamespace } from '@gitops/shared/testing';
import { afterAll, describe, it } from 'vitest';

const kc = loadKubeConfig(process.env.KUBECONFIG);
const namespace = `appstudio-admission-${randomBytes(4).toString('hex')}`;

type Spec = Record<string, unknown>;

const path = (kind: KindDescriptor, name?: string) =>
  `${collectionPath({ ...kind.resource, namespace })}${name ? `/${name}` : ''}`;

async function create(kind: KindDescriptor, name: string, spec: Spec): Promise<KubeObject> {
  return (await kubeRequest(kc, {
    method: HttpMethod.POST,
    path: path(kind),
    body: { apiVersion: APPSTUDIO_GROUP_VERSION, kind: kind.kind, metadata: { name, namespace }, spec },
  })) as KubeObject;
}

async function patchSpec(kind: KindDescriptor, name: string, spec: Spec): Promise<KubeObject> {
  return (await kubeRequest(kc, {
    method: HttpMethod.PATCH,
    path: path(kind, name),
    body: { spec },
    contentType: 'application/merge-patch+json',
  })) as KubeObject;
}

/** Asserts `attempt` is refused at admission (422 Invalid) with a message containing `message`. */
async function rejected(attempt: () => Promise<unknown>, message: string): Promise<void> {
  await assert.rejects(attempt, (err: unknown) => {
    assert.ok(err instanceof KubeApiError, `expected an API error, got ${String(err)}`);
    assert.equal(err.statusCode, 422, err.message);
    assert.ok(err.message.includes(message), `expected "${message}" in: ${err.message}`);
    return true;
  });
}

let counter = 0;
const fresh = (prefix: string) => `${prefix}-${++counter}`;

const credentials = (fields: Spec = {}) => ({
  targetNamespace: 'target',
  apiURL: 'https://api.example.com:6443',
  clusterCredentialsSecret: 'cluster-secret',
  allowInsecureSkipTLSVerify: false,
  ...fields,
});
const envSpec = (unstable?: Spec): Spec => ({
  displayName: '',
  deploymentStrategy: 'AppStudioAutomated',
  ...(unstable ? { unstableConfigurationFields: unstable } : {}),
});

useNamespace(kc, namespace);

describe('Environment admission', () => {
  const E = AppStudioKinds.Environment;
  it('accepts an Environment without cluster fields, and an OpenShift one without ingress domain', async () => {
    await create(E, 'kubernetes-environment-1', envSpec());
    await create(
      E,
      fresh('openshift'),
      envSpec({ clusterType: 'OpenShift', kubernetesCredentials: credentials() }),
    );
  });

  it('accepts a Kubernetes Environment with an ingress domain', async () => {
    await create(
      E,
      fresh('kube'),
      envSpec({ clusterType: 'Kubernetes', kubernetesCredentials: credentials({ ingressDomain: 'domain' }) }),
    );
  });

  it('rejects a Kubernetes Environment without ingress domain, on create and on update', async () => {
    const message = 'ingress domain cannot be empty if cluster is of type Kubernetes';
    await rejected(
      () =>
        create(
          E,
          fresh('kube'),
          envSpec({ clusterType: 'Kubernetes', kubernetesCredentials: credentials() }),
        ),
      message,
    );
    const name = fresh('kube');
    await create(E, name, envSpec({ clusterType: 'OpenShift', kubernetesCredentials: credentials() }));
    await rejected(
      () => patchSpec(E, name, { unstableConfigurationFields: { clusterType: 'Kubernetes' } }),
      message,
    );
  });

  it('rejects an ingress domain that is not a DNS subdomain, whatever the cluster type', async () => {
    for (const clusterType of ['Kubernetes', 'OpenShift']) {
      await rejected(
        () =>
          create(
            E,
            fresh('ingress'),
            envSpec({
              clusterType,
              kubernetesCredentials: credentials({ ingressDomain: 'AbADIngr3ssDomaiN.CoM' }),
            }),
          ),
        `invalid ingress domain: "AbADIngr3ssDomaiN.CoM": an ingress domain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`,
      );
    }
  });

  it('rejects names that are not DNS labels (upper case letters, over 63 characters)', async () => {
    const long = `e${'x'.repeat(64)}`;
    await rejected(
      () => create(E, long, envSpec()),
      `invalid environment name: ${long}, an environment resource name must start with a lower case alphabetical character, be under 63 characters, and can only consist of lower case alphanumeric characters or ‘-’`,
    );
    await rejected(
      () => create(E, 'dotted.environment', envSpec()),
      'invalid environment name: dotted.environment',
    );
    // The API server refuses upper-case object names itself, before any rule of ours.
    await rejected(() => create(E, 'kubernetesEnvironment', envSpec()), 'kubernetesEnvironment');
  });

  it('rejects an API URL that is neither an absolute URI nor an absolute path, on create and on update', async () => {
    // The original's message ends with a space; the API server trims it from admission messages.
    const message = "API URL must be an absolute URL starting with an 'https' scheme";
    await rejected(
      () =>
        create(E, fresh('url'), envSpec({ kubernetesCredentials: credentials({ apiURL: 'api.test.com' }) })),
      `parse "api.test.com": invalid URI for request: ${message}`,
    );
    const name = fresh('url');
    await create(E, name, envSpec({ kubernetesCredentials: credentials() }));
    await rejected(
      () =>
        patchSpec(E, name, {
          unstableConfigurationFields: { kubernetesCredentials: { apiURL: 'api/test-url.com:6443' } },
        }),
      message,
    );
  });

  it('rejects an Environment without displayName or deploymentStrategy (required, may be empty)', async () => {
    await rejected(() => create(E, fresh('req'), { displayName: '' }), 'deploymentStrategy');
  });
});

describe('Snapshot admission', () => {
  const S = AppStudioKinds.Snapshot;
  const components = [{ name: 'component-a', containerImage: 'images.example/org/a@sha256:1' }];

  it('accepts an identical update and changes of display fields', async () => {
    const name = fresh('snapshot');
    await create(S, name, { application: 'app', components });
    await patchSpec(S, name, { application: 'app', components, displayName: 'new name' });
  });

  it('rejects a change of application', async () => {
    const name = fresh('snapshot');
    await create(S, name, { application: 'app', components });
    await rejected(
      () => patchSpec(S, name, { application: 'new-app-name' }),
      'application field cannot be updated to new-app-name',
    );
  });

  it('rejects a change of component name, image or source, printing the new list in the original form', async () => {
    const name = fresh('snapshot');
    await create(S, name, { application: 'app', components });
    await rejected(
      () =>
        patchSpec(S, name, {
          components: [{ name: 'component-b', containerImage: 'images.example/org/a@sha256:1' }],
        }),
      'components cannot be updated to [{Name:component-b ContainerImage:images.example/org/a@sha256:1 Source:{ComponentSourceUnion:{GitSource:<nil>}}}]',
    );
    await rejected(
      () =>
        patchSpec(S, name, {
          components: [{ name: 'component-a', containerImage: 'images.example/org/a@sha256:2' }],
        }),
      'components cannot be updated to [{Name:component-a ContainerImage:images.example/org/a@sha256:2',
    );
    await rejected(
      () =>
        patchSpec(S, name, {
          components: [
            { ...components[0], source: { git: { url: 'https://git.example/r', revision: 'main' } } },
          ],
        }),
      'components cannot be updated to [{Name:component-a ContainerImage:images.example/org/a@sha256:1 Source:{ComponentSourceUnion:{GitSource:{URL:https://git.example/r Revision:main Context: DevfileURL: DockerfileURL:}}}}]',
    );
  });
});

describe('SnapshotEnvironmentBinding admission', () => {
  const B = AppStudioKinds.SnapshotEnvironmentBinding;
  const spec = {
    application: 'app',
    environment: 'staging',
    snapshot: 's1',
    components: [{ name: 'component-a' }],
  };

  it('accepts changes of snapshot and components', async () => {
    const name = fresh('binding');
    await create(B, name, spec);
    await patchSpec(B, name, { snapshot: 's2', components: [] });
  });

  it('rejects a change of application, then of environment', async () => {
    const name = fresh('binding');
    await create(B, name, spec);
    await rejected(
      () => patchSpec(B, name, { application: 'new-app-name', environment: 'new-env-name' }),
      'application field cannot be updated to new-app-name',
    );
    await rejected(
      () => patchSpec(B, name, { environment: 'new-env-name' }),
      'environment field cannot be updated to new-env-name',
    );
  });

  it('rejects a binding without spec fields', async () => {
    await rejected(() => create(B, fresh('binding'), { application: 'app' }), 'environment');
  });
});

describe('PromotionRun admission', () => {
  const P = AppStudioKinds.PromotionRun;
  const spec = {
    snapshot: 'my-snapshot',
    application: 'app',
    manualPromotion: { targetEnvironment: 'prod' },
  };

  it('accepts an identical update', async () => {
    const name = fresh('promotion');
    await create(P, name, spec);
    await patchSpec(P, name, spec);
  });

  it('rejects any change of spec, printing the new spec in the original form', async () => {
    const name = fresh('promotion');
    await create(P, name, spec);
    await rejected(
      () => patchSpec(P, name, { snapshot: 'other' }),
      'spec cannot be updated to {Snapshot:other Application:app ManualPromotion:{TargetEnvironment:prod} AutomatedPromotion:{InitialEnvironment:}}',
    );
    await rejected(
      () => patchSpec(P, name, { application: 'app-2', manualPromotion: { targetEnvironment: 'staging' } }),
      'spec cannot be updated to {Snapshot:my-snapshot Application:app-2 ManualPromotion:{TargetEnvironment:staging} AutomatedPromotion:{InitialEnvironment:}}',
    );
    await rejected(
      () =>
        patchSpec(P, name, { manualPromotion: null, automatedPromotion: { initialEnvironment: 'staging' } }),
      'spec cannot be updated to {Snapshot:my-snapshot Application:app ManualPromotion:{TargetEnvironment:} AutomatedPromotion:{InitialEnvironment:staging}}',
    );
  });
});

describe('malformed App Studio objects', () => {
  it('are refused with the field that is wrong: a boolean given as text, a count given as text, a missing spec', async () => {
    await rejected(
      () =>
        create(AppStudioKinds.Environment, fresh('types'), {
          ...envSpec({ kubernetesCredentials: credentials({ allowInsecureSkipTLSVerify: 'yes' }) }),
        }),
      'allowInsecureSkipTLSVerify',
    );
    await rejected(
      () =>
        create(AppStudioKinds.SnapshotEnvironmentBinding, fresh('types'), {
          application: 'app',
          environment: 'env',
          snapshot: 's',
          components: [{ name: 'a', configuration: { replicas: 'two' } }],
        }),
      'replicas',
    );
    await rejected(
      () =>
        kubeRequest(kc, {
          method: HttpMethod.POST,
          path: path(AppStudioKinds.SnapshotEnvironmentBinding),
          body: {
            apiVersion: APPSTUDIO_GROUP_VERSION,
            kind: 'SnapshotEnvironmentBinding',
            metadata: { name: fresh('nospec'), namespace },
          },
        }),
      'spec',
    );
  });
});

describe('the App Studio kinds as kubectl sees them', () => {
  it('are served with the original short names and a status subresource', async () => {
    const list = (await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: `/apis/${APPSTUDIO_GROUP_VERSION}`,
    })) as {
      resources: { name: string; kind: string; shortNames?: string[] }[];
    };
    const shortNames = (plural: string) => list.resources.find((r) => r.name === plural)?.shortNames ?? [];
    assert.deepEqual(shortNames('environments'), ['env']);
    assert.deepEqual(shortNames('snapshots'), ['as', 'snapshot']);
    assert.deepEqual(shortNames('snapshotenvironmentbindings'), ['aseb', 'binding']);
    assert.deepEqual(shortNames('promotionruns'), ['apr', 'promotion']);
    for (const plural of ['environments', 'snapshots', 'snapshotenvironmentbindings', 'promotionruns']) {
      assert.ok(
        list.resources.some((r) => r.name === `${plural}/status`),
        `${plural} has a status subresource`,
      );
    }
  });
});

describe('DeploymentTarget, DeploymentTargetClaim and DeploymentTargetClass admission', () => {
  const targetSpec = (fields: Spec = {}, credentialFields: Spec = {}): Spec => ({
    deploymentTargetClassName: 'some-class',
    kubernetesCredentials: {
      defaultNamespace: 'target',
      apiURL: 'https://api.example.com:6443',
      clusterCredentialsSecret: 'cluster-secret',
      allowInsecureSkipTLSVerify: false,
      ...credentialFields,
    },
    ...fields,
  });
  const classPath = (name?: string) =>
    `/apis/${APPSTUDIO_GROUP_VERSION}/deploymenttargetclasses${name ? `/${name}` : ''}`;
  const createClass = (name: string, spec: Spec) =>
    kubeRequest(kc, {
      method: HttpMethod.POST,
      path: classPath(),
      body: { apiVersion: APPSTUDIO_GROUP_VERSION, kind: 'DeploymentTargetClass', metadata: { name }, spec },
    });
  const classes: string[] = [];
  afterAll(async () => {
    for (const name of classes)
      await kubeRequest(kc, { method: HttpMethod.DELETE, path: classPath(name) }).catch(() => {});
  });

  it('a class needs a provisioner and a reclaim policy of Delete or Retain', async () => {
    const name = `admission-class-${randomBytes(4).toString('hex')}`;
    classes.push(name);
    await createClass(name, { provisioner: 'managed-gitops.redhat.com/namespace', reclaimPolicy: 'Retain' });
    await rejected(
      () => createClass(`${name}-x`, { provisioner: 'p', reclaimPolicy: 'Recycle' }),
      'reclaimPolicy must be Delete or Retain, not "Recycle"',
    );
    await rejected(
      () => createClass(`${name}-y`, { provisioner: '', reclaimPolicy: 'Delete' }),
      'provisioner must not be empty',
    );
    await rejected(() => createClass(`${name}-z`, { provisioner: 'p' }), 'reclaimPolicy');
  });

  it('a target needs credentials fields, an absolute API URL and object names', async () => {
    await create(AppStudioKinds.DeploymentTarget, fresh('dt'), targetSpec());
    await create(
      AppStudioKinds.DeploymentTarget,
      fresh('dt'),
      targetSpec({}, { apiURL: '', clusterCredentialsSecret: '', defaultNamespace: '' }),
    );
    await rejected(
      () =>
        create(AppStudioKinds.DeploymentTarget, fresh('dt'), targetSpec({}, { apiURL: 'api.example.com' })),
      'apiURL "api.example.com" is not an absolute URL (scheme://host)',
    );
    await rejected(
      () => create(AppStudioKinds.DeploymentTarget, fresh('dt'), targetSpec({ claimRef: 'Not_A_Name' })),
      'claimRef "Not_A_Name" is not a valid DeploymentTargetClaim name',
    );
    await rejected(
      () =>
        create(AppStudioKinds.DeploymentTarget, fresh('dt'), {
          deploymentTargetClassName: 'c',
        }),
      'kubernetesCredentials',
    );
  });

  it('a target cannot move from one claim to another; clearing first is fine', async () => {
    const name = fresh('dt-claimref');
    await create(AppStudioKinds.DeploymentTarget, name, targetSpec({ claimRef: 'claim-a' }));
    await rejected(
      () => patchSpec(AppStudioKinds.DeploymentTarget, name, { claimRef: 'claim-b' }),
      'claimRef cannot change from "claim-a" to "claim-b": clear it first',
    );
    await patchSpec(AppStudioKinds.DeploymentTarget, name, { claimRef: '' });
    await patchSpec(AppStudioKinds.DeploymentTarget, name, { claimRef: 'claim-b' });
  });

  it('a claim’s targetName cannot move once set, and names must be object names', async () => {
    const name = fresh('dtc');
    await create(AppStudioKinds.DeploymentTargetClaim, name, { deploymentTargetClassName: '' });
    await patchSpec(AppStudioKinds.DeploymentTargetClaim, name, { targetName: 'target-a' });
    await rejected(
      () => patchSpec(AppStudioKinds.DeploymentTargetClaim, name, { targetName: 'target-b' }),
      'targetName cannot change once set (it is "target-a")',
    );
    await rejected(
      () =>
        create(AppStudioKinds.DeploymentTargetClaim, fresh('dtc'), {
          deploymentTargetClassName: 'Bad Class',
        }),
      'deploymentTargetClassName "Bad Class" is not a valid object name',
    );
    await rejected(
      () => create(AppStudioKinds.DeploymentTargetClaim, fresh('dtc'), {}),
      'deploymentTargetClassName',
    );
  });

  it('are served with short names dt, dtc, dtcls; the class is cluster-scoped', async () => {
    const list = (await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: `/apis/${APPSTUDIO_GROUP_VERSION}`,
    })) as { resources: { name: string; namespaced: boolean; shortNames?: string[] }[] };
    const resource = (plural: string) => list.resources.find((r) => r.name === plural);
    assert.deepEqual(resource('deploymenttargets')?.shortNames, ['dt']);
    assert.deepEqual(resource('deploymenttargetclaims')?.shortNames, ['dtc']);
    assert.deepEqual(resource('deploymenttargetclasses')?.shortNames, ['dtcls']);
    assert.equal(resource('deploymenttargetclasses')?.namespaced, false);
    assert.equal(resource('deploymenttargets')?.namespaced, true);
  });
});
