import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import {
  loadRhoasCrds,
  RHOAS_API_GROUP,
  RHOAS_API_VERSION,
  RhoasConditionsOf,
  RhoasKind,
  RhoasKinds,
  RhoasPlural,
  RhoasShortName,
} from './index.ts';

describe('the RHOAS CRD files', () => {
  it('define exactly the four kinds, with the plurals and short names the code uses', async () => {
    const crds = await loadRhoasCrds();
    assert.deepEqual(
      Object.fromEntries(crds.map((c) => [c.spec.names.kind, c.spec.names.plural])),
      Object.fromEntries(Object.values(RhoasKind).map((k) => [k, RhoasPlural[k]])),
    );
    for (const crd of crds) {
      const kind = crd.spec.names.kind as RhoasKind;
      assert.deepEqual(crd.spec.names.shortNames, [RhoasShortName[kind]], kind);
      assert.equal(RhoasKinds[kind].apiVersion, `${RHOAS_API_GROUP}/${RHOAS_API_VERSION}`);
    }
  });

  it('are namespaced v1alpha1 with a status subresource, a spec that keeps unknown fields, Finished and Age columns', async () => {
    for (const crd of await loadRhoasCrds()) {
      const kind = crd.spec.names.kind;
      assert.equal(crd.metadata.name, `${crd.spec.names.plural}.${RHOAS_API_GROUP}`, kind);
      assert.equal(crd.spec.scope, 'Namespaced', kind);
      const version = crd.spec.versions[0];
      assert.equal(crd.spec.versions.length, 1);
      assert.equal(version?.name, RHOAS_API_VERSION);
      assert.deepEqual(version?.subresources?.status, {}, kind);
      const properties = (version?.schema.openAPIV3Schema.properties ?? {}) as Record<
        string,
        Record<string, unknown>
      >;
      const spec = properties.spec;
      assert.equal(spec?.['x-kubernetes-preserve-unknown-fields'], true, kind);
      const columns = version?.additionalPrinterColumns?.map((c) => c.name) ?? [];
      assert.equal(columns[0], 'Finished', kind);
      assert.ok(columns.includes('Message'), kind);
      assert.equal(columns.at(-1), 'Age', kind);
    }
  });

  it('carry the service.binding annotations on the two connection kinds only', async () => {
    const byKind = new Map((await loadRhoasCrds()).map((c) => [c.spec.names.kind, c]));
    const annotations = (kind: string) =>
      (byKind.get(kind)?.metadata.annotations ?? {}) as Record<string, string>;
    const bindings = [
      ['KafkaConnection', 'service.binding/bootstrapServers', 'path={.status.bootstrapServerHost}'],
      [
        'KafkaConnection',
        'service.binding/password',
        'path={.status.serviceAccountSecretName},objectType=Secret,sourceKey=client-secret',
      ],
      ['ServiceRegistryConnection', 'service.binding/registryUrl', 'path={.status.registryUrl}'],
      ['ServiceRegistryConnection', 'service.binding/oauthTokenUrl', 'path={.status.metadata.oauthTokenUrl}'],
    ] as const;
    for (const [kind, key, value] of bindings) assert.equal(annotations(kind)[key], value, `${kind} ${key}`);
    assert.deepEqual(annotations('CloudServicesRequest'), {});
    assert.deepEqual(annotations('CloudServiceAccountRequest'), {});
  });

  it('list the conditions of each kind in the original order, Finished included', () => {
    assert.deepEqual(RhoasConditionsOf.CloudServicesRequest, [
      'AcccesTokenSecretValid',
      'ServiceRegistriesUpToDate',
      'Finished',
      'UserKafkasUpToDate',
    ]);
    for (const list of Object.values(RhoasConditionsOf))
      assert.ok((list as readonly string[]).includes('Finished'));
  });
});
