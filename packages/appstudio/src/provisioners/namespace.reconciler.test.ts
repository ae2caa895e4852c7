import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  AppStudioLabel,
  DeploymentTargetAnnotation,
  PROVISIONED_FOR_CLAIM_REF_ANNOTATION,
  Provisioner as ProvisionerName,
} from '@gitops/api';
import { describe, it } from 'vitest';
import { noApiServer, object, quietLogger, target } from '../testing/unit.ts';
import {
  claimOfProvisionedTarget,
  deprovisionNamespace,
  namespaceDeletion,
  provisionedForClaim,
  provisionedNamespaceName,
} from './namespace.reconciler.ts';

/** A target as the provisioner makes it for the claim `c` in `ns`. */
const provisioned = (overrides: { name?: string; secret?: string; namespace?: string; by?: string } = {}) =>
  target(
    overrides.name ?? 'c-dt',
    {
      claimRef: 'c',
      kubernetesCredentials: {
        defaultNamespace: overrides.namespace ?? 'ns-c',
        apiURL: 'https://kubernetes.default.svc',
        clusterCredentialsSecret: overrides.secret ?? 'c-dt-kubeconfig',
        allowInsecureSkipTLSVerify: false,
      },
    },
    {},
    {
      annotations: { [DeploymentTargetAnnotation.ProvisionedBy]: overrides.by ?? ProvisionerName.Namespace },
    },
  );

describe('namespace provisioner names', () => {
  it('<claim namespace>-<claim>, or over 63 characters its first 54, "-" and 8 hex of the SHA-256', () => {
    assert.equal(provisionedNamespaceName('team-a', 'dev'), 'team-a-dev');
    const claim = 'c'.repeat(60);
    const full = `team-a-${claim}`;
    const name = provisionedNamespaceName('team-a', claim);
    assert.equal(name, `${full.slice(0, 54)}-${createHash('sha256').update(full).digest('hex').slice(0, 8)}`);
    assert.equal(name.length, 63);
  });
});

describe('namespace provisioner step claimOfProvisionedTarget: a target it made, by its own fields', () => {
  it("names the claim of a target with the provisioner's annotation, name, Secret and namespace", () => {
    assert.equal(claimOfProvisionedTarget(provisioned()), 'c');
  });

  it('is undefined when any of them differs', () => {
    assert.equal(claimOfProvisionedTarget(provisioned({ by: ProvisionerName.DevSandbox })), undefined);
    assert.equal(claimOfProvisionedTarget(provisioned({ name: 'other' })), undefined);
    assert.equal(claimOfProvisionedTarget(provisioned({ secret: 'someone-elses' })), undefined);
    assert.equal(claimOfProvisionedTarget(provisioned({ namespace: 'kube-system' })), undefined);
  });
});

describe("namespace provisioner step provisionedForClaim: proof that a namespace is the claim's", () => {
  const claim = { namespace: 'ns', name: 'c', uid: 'uid-c' };
  const namespace = (labels: Record<string, string>, annotations?: Record<string, string>) =>
    object('ns-c', {}, { namespace: undefined, labels, ...(annotations ? { annotations } : {}) });

  it('its label is the claim uid, and its claim-ref annotation (when it has one) names the claim', () => {
    const label = { [AppStudioLabel.ProvisionedForClaim]: 'uid-c' };
    assert.equal(provisionedForClaim(namespace(label), claim), true);
    assert.equal(
      provisionedForClaim(namespace(label, { [PROVISIONED_FOR_CLAIM_REF_ANNOTATION]: 'ns/c' }), claim),
      true,
    );
    assert.equal(
      provisionedForClaim(namespace(label, { [PROVISIONED_FOR_CLAIM_REF_ANNOTATION]: 'ns/other' }), claim),
      false,
    );
    assert.equal(
      provisionedForClaim(namespace({ [AppStudioLabel.ProvisionedForClaim]: 'uid-x' }), claim),
      false,
    );
    assert.equal(provisionedForClaim(namespace(label), { ...claim, uid: undefined }), false);
    assert.equal(provisionedForClaim(undefined, claim), false);
  });
});

describe('namespace provisioner reclaim', () => {
  it('a target it did not make is done at once, nothing deleted (no API call)', async () => {
    const deps = { kc: noApiServer(), now: () => new Date() };
    const foreign = provisioned({ by: 'someone' });
    assert.deepEqual(await deprovisionNamespace(deps, foreign, quietLogger), { kind: 'gone' });
  });

  it('a namespace being deleted: waiting (2 s), Failed more than 2 minutes after the delete', () => {
    const deleting = object('ns-c', {}, { deletionTimestamp: '2026-01-01T00:00:00Z' });
    const at = (seconds: number) => new Date(Date.parse('2026-01-01T00:00:00Z') + seconds * 1000);
    assert.deepEqual(namespaceDeletion(deleting, at(119)), { kind: 'waiting', requeueAfter: 2_000 });
    assert.deepEqual(namespaceDeletion(deleting, at(121)), { kind: 'failed', requeueAfter: 2_000 });
  });
});
