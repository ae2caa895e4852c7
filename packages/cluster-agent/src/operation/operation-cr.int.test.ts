/**
 * The Operation CR of a finished operation does not stay behind: when its first deletes are refused (the agent
 * cut from the API server, an admission policy), the agent keeps trying until the CR is gone; when the operation
 * finished without the agent deleting its CR (a finish that committed while the agent saw the connection fail),
 * the sweep finds it. A real API server refuses with ValidatingAdmissionPolicies; nothing else touches the CRs
 * meanwhile (no event, no relist: RESYNC_INTERVAL is the default 10 min).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { operationCrName } from '@gitops/api';
import { type ClusterUserRow, getOperation } from '@gitops/db';
import { givenNotDueOperation } from '@gitops/db/testing';
import {
  collectionPath,
  createMetricsRegistry,
  deleteIfExists,
  getObject,
  HttpMethod,
  kubeRequest,
  type Registry,
} from '@gitops/shared';
import { eventually, randomSuffix } from '@gitops/shared/testing';
import { sql } from 'kysely';
import { beforeAll, describe, it } from 'vitest';
import { useAgentFixture } from '../testing/agent-fixture.ts';

const ADMISSION = '/apis/admissionregistration.k8s.io/v1';
const OPERATION = { apiVersion: 'managed-gitops.redhat.com/v1alpha1', kind: 'Operation' } as const;

describe('Operation CRs of finished operations', () => {
  const f = useAgentFixture({ prefix: 'opcr' });

  /** A policy refusing `operation` on `resource` in the fixture's Argo CD namespace; returns its removal. */
  async function refuse(
    apiGroup: string,
    resource: string,
    operation: 'CREATE' | 'DELETE',
    message: string,
  ): Promise<() => Promise<void>> {
    const name = `opcr-refuse-${randomSuffix()}`;
    const policies = `${ADMISSION}/validatingadmissionpolicies`;
    const bindings = `${ADMISSION}/validatingadmissionpolicybindings`;
    await kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: policies,
      body: {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicy',
        metadata: { name },
        spec: {
          failurePolicy: 'Fail',
          matchConstraints: {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': f.argoCdNamespace } },
            resourceRules: [
              { apiGroups: [apiGroup], apiVersions: ['*'], operations: [operation], resources: [resource] },
            ],
          },
          validations: [{ expression: 'false', message }],
        },
      },
    });
    await kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: bindings,
      body: {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicyBinding',
        metadata: { name },
        spec: { policyName: name, validationActions: ['Deny'] },
      },
    });
    return async () => {
      await kubeRequest(f.kc, { method: HttpMethod.DELETE, path: `${bindings}/${name}` });
      await kubeRequest(f.kc, { method: HttpMethod.DELETE, path: `${policies}/${name}` });
    };
  }

  /** Resolves once a dry run of `request` fails with `message` (the API server loaded the policy). */
  const inForce = (message: string, request: Parameters<typeof kubeRequest>[1]) =>
    eventually(`the policy "${message}" in force`, async () => {
      try {
        await kubeRequest(f.kc, { ...request, query: { ...request.query, dryRun: 'All' } });
        return false;
      } catch (error) {
        if (String(error).includes(message)) return true;
        throw error;
      }
    });

  const metric = async (registry: Registry, name: string, labels: Record<string, string>) => {
    const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
    return values
      .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
      .reduce((sum, v) => sum + v.value, 0);
  };

  const registry = createMetricsRegistry({ defaultMetrics: false });
  const controller = { controller: 'cluster-agent-operation-crs' };
  let engineInstanceId: string;
  let tenant: ClusterUserRow;
  beforeAll(async () => {
    const tenantNamespace = `opcr-tenant-${f.suffix}`;
    await f.createNamespace(tenantNamespace);
    const agent = await f.startAgent(f.config({ OPERATION_SWEEP_INTERVAL: '500ms' }), registry);
    engineInstanceId = agent.engineInstance()!.id;
    tenant = await f.givenTenant(tenantNamespace, { workspaceEnvironment: false });
  });
  const crOf = (operation: { id: string }) => ({
    ...OPERATION,
    name: operationCrName(operation.id),
    namespace: f.argoCdNamespace,
  });

  it('a CR whose delete was refused after its operation finished is deleted once deletes go through again', async () => {
    // Deletes of Operation CRs are refused from the start; new Applications until the CR is in the agent's
    // cache, so the operation finishes while its CR is there (the path of a finished operation's own delete).
    const deleteMessage = 'Operation CR deletes refused by the test';
    const allowDeletes = await refuse('managed-gitops.redhat.com', 'operations', 'DELETE', deleteMessage);
    const createMessage = 'Application creates refused by the test';
    const allowCreates = await refuse('argoproj.io', 'applications', 'CREATE', createMessage);
    const sentinel = { ...OPERATION, name: `operation-sentinel-${f.suffix}`, namespace: f.argoCdNamespace };
    await kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: collectionPath({
        apiVersion: OPERATION.apiVersion,
        plural: 'operations',
        namespace: f.argoCdNamespace,
      }),
      body: { ...OPERATION, metadata: { name: sentinel.name }, spec: { operationID: 'not-a-uuid' } },
    });
    await inForce(deleteMessage, {
      method: HttpMethod.DELETE,
      path: `${collectionPath({ apiVersion: OPERATION.apiVersion, plural: 'operations', namespace: f.argoCdNamespace })}/${sentinel.name}`,
    });
    await inForce(createMessage, {
      method: HttpMethod.POST,
      path: collectionPath({
        apiVersion: 'argoproj.io/v1alpha1',
        plural: 'applications',
        namespace: f.argoCdNamespace,
      }),
      body: {
        apiVersion: 'argoproj.io/v1alpha1',
        kind: 'Application',
        metadata: { name: 'dry-run' },
        spec: { project: 'default', destination: {}, source: { repoURL: 'https://example.com/r' } },
      },
    });

    const reconciledBefore = await metric(registry, 'controller_runtime_reconcile_total', controller);
    const { operation } = await f.givenDeployment(tenant, tenant.namespace_name, engineInstanceId);
    await f.relay(operation);
    const cr = crOf(operation);
    await eventually('the first attempt refused and retried', async () => {
      const row = await getOperation(f.db, operation.id);
      return row && row.attempts >= 1 && row.message.includes(createMessage) ? row : undefined;
    });
    await eventually(
      'the Operation CR reconciled (in the cache)',
      async () =>
        (await metric(registry, 'controller_runtime_reconcile_total', controller)) > reconciledBefore,
    );

    const errorsBefore = await metric(registry, 'controller_runtime_reconcile_errors_total', controller);
    await allowCreates();
    await eventually('the operation completed', async () =>
      (await getOperation(f.db, operation.id))?.state === 'Completed' ? true : undefined,
    );
    // Its CR's delete is refused: the agent goes on trying (the CR controller's retries), the CR stays.
    await eventually(
      'the refused delete retried',
      async () =>
        (await metric(registry, 'controller_runtime_reconcile_errors_total', controller)) > errorsBefore,
    );
    assert.ok(await getObject(f.kc, cr), 'the CR is still there while deletes are refused');

    await allowDeletes();
    await eventually('the Operation CR deleted', async () =>
      (await getObject(f.kc, cr)) ? undefined : true,
    );
    await deleteIfExists(f.kc, sentinel);
  });

  it('a CR whose operation finished without the agent deleting it is found by the sweep and deleted', async () => {
    // Waiting and not due for an hour: the agent, told by the CR, leaves it alone.
    const operation = await givenNotDueOperation(f.db, {
      engineInstanceId,
      resourceType: 'Application',
      resourceId: randomUUID(),
      ownerUserId: tenant.id,
    });
    const reconciledBefore = await metric(registry, 'controller_runtime_reconcile_total', controller);
    await f.relay(operation);
    await eventually(
      'the Operation CR reconciled while its operation waits',
      async () =>
        (await metric(registry, 'controller_runtime_reconcile_total', controller)) > reconciledBefore,
    );
    assert.ok(await getObject(f.kc, crOf(operation)), 'the CR of a waiting operation stays');

    // Finished by a commit the agent did not see succeed (its connection failed on the reply): no finish of
    // this process deletes the CR, and nothing changes the CR.
    await f.db
      .updateTable('operation')
      .set({ state: 'Completed', finished_at: sql<Date>`now()` })
      .where('id', '=', operation.id)
      .execute();
    await eventually('the Operation CR deleted by the sweep', async () =>
      (await getObject(f.kc, crOf(operation))) ? undefined : true,
    );
  });
});
