/**
 * The RHOAS CRDs as the real API server serves them (installed by the test harness from
 * packages/api/crds/rhoas): discovery lists the four kinds with their short names, the `rhoas` category and
 * a status subresource.
 */
import assert from 'node:assert/strict';
import { RHOAS_API_GROUP_VERSION, RhoasKind, RhoasPlural, RhoasShortName } from '@gitops/api';
import { HttpMethod, kubeRequest, loadKubeConfig } from '@gitops/shared';
import { describe, it } from 'vitest';

describe('the RHOAS kinds in the API server', () => {
  it('are discovered with their short names, the rhoas category and a status subresource', async () => {
    const kc = loadKubeConfig(process.env.KUBECONFIG);
    const list = (await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: `/apis/${RHOAS_API_GROUP_VERSION}`,
    })) as {
      resources: {
        name: string;
        kind: string;
        namespaced: boolean;
        shortNames?: string[];
        categories?: string[];
      }[];
    };
    for (const kind of Object.values(RhoasKind)) {
      const resource = list.resources.find((r) => r.name === RhoasPlural[kind]);
      assert.ok(resource, `${kind} is served`);
      assert.equal(resource.kind, kind);
      assert.equal(resource.namespaced, true);
      assert.deepEqual(resource.shortNames, [RhoasShortName[kind]]);
      assert.deepEqual(resource.categories, ['rhoas']);
      assert.ok(
        list.resources.some((r) => r.name === `${RhoasPlural[kind]}/status`),
        `${kind}/status`,
      );
    }
  });
});
