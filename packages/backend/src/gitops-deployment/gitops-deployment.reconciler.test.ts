import assert from 'node:assert/strict';
import {
  ConditionStatus,
  DeploymentEventReason,
  GitOpsDeploymentConditionType,
  GitOpsDeploymentMessage,
  GitOpsDeploymentReason,
} from '@gitops/api';
import type { OperationRow } from '@gitops/db';
import { createLogger, type KubeObject } from '@gitops/shared';
import { describe, test } from 'vitest';
import type { GitOpsDeploymentObject } from '../kinds.ts';
import type { ResolvedEnvironment } from '../managed-environment/environment.resolver.ts';
import { RELEASE_WAIT_MS } from './application.store.ts';
import {
  awayState,
  DeploymentErrorMessage,
  failedOperationState,
  nextErrorOccurred,
} from './gitops-deployment.conditions.ts';
import { desiredOf, staleRowsOf } from './gitops-deployment.reconciler.ts';

const logger = createLogger({ name: 'test', level: 'silent' });
const NOW = new Date('2026-01-02T03:04:05Z');
/** A database the step must not touch (any use throws). */
const untouchedDb = new Proxy(
  {},
  {
    get() {
      throw new Error('the database was used');
    },
  },
) as never;

function deployment(spec: unknown, namespace = 'jane'): GitOpsDeploymentObject {
  return {
    apiVersion: 'managed-gitops.redhat.com/v1alpha1',
    kind: 'GitOpsDeployment',
    metadata: { namespace, name: 'd', uid: 'u-1' },
    spec,
  } as GitOpsDeploymentObject;
}

const source = { repoURL: 'https://github.com/org/repo', path: 'env/dev' };

describe('ErrorOccurred of a GitOpsDeployment', () => {
  test('an error sets True with its message; an ok state resolves only an error that was reported', () => {
    const error = nextErrorOccurred([], undefined, { status: 'error', message: 'boom' }, NOW);
    assert.equal(error?.length, 1);
    assert.equal(error?.[0]?.type, GitOpsDeploymentConditionType.ErrorOccurred);
    assert.equal(error?.[0]?.status, ConditionStatus.True);
    assert.equal(error?.[0]?.reason, GitOpsDeploymentReason.ErrorOccurred);
    assert.equal(error?.[0]?.message, 'boom');

    assert.equal(nextErrorOccurred([], undefined, { status: 'ok' }, NOW), undefined);

    const existing = error?.[0];
    const resolved = nextErrorOccurred(error ?? [], existing, { status: 'ok' }, NOW);
    assert.equal(resolved?.length, 1);
    assert.equal(resolved?.[0]?.status, ConditionStatus.False);
    assert.equal(resolved?.[0]?.reason, GitOpsDeploymentReason.ErrorOccurredResolved);
    assert.equal(resolved?.[0]?.message, '');
  });

  test("a Failed operation is an error with the agent's message (or a default); anything else is ok", () => {
    const failed = { state: 'Failed', message: 'Argo CD refused' } as OperationRow;
    assert.deepEqual(failedOperationState(failed, DeploymentErrorMessage.applicationOperationFailed), {
      status: 'error',
      message: 'the Argo CD Application could not be updated: Argo CD refused',
    });
    assert.deepEqual(
      failedOperationState({ ...failed, message: '' }, DeploymentErrorMessage.applicationOperationFailed),
      { status: 'error', message: 'the Argo CD Application could not be updated: the operation failed' },
    );
    assert.deepEqual(
      failedOperationState(
        { ...failed, state: 'Completed' } as OperationRow,
        DeploymentErrorMessage.invalidSpec,
      ),
      { status: 'ok' },
    );
    assert.deepEqual(failedOperationState(undefined, DeploymentErrorMessage.invalidSpec), { status: 'ok' });
  });

  test('waiting for an instance is fine until GITOPS_ENGINE_INSTANCE_AWAY_AFTER, and never reported when unset (no database read)', async () => {
    const waiting = { created_at: new Date(), engine_instance_id: 'i-1' } as OperationRow;
    const deps = { db: untouchedDb, engineInstanceAwayAfterMs: 60_000 };
    assert.deepEqual(await awayState(deps, undefined), { status: 'ok' });
    assert.deepEqual(await awayState(deps, waiting), { status: 'ok' });
    assert.deepEqual(await awayState({ db: untouchedDb, engineInstanceAwayAfterMs: undefined }, waiting), {
      status: 'ok',
    });
  });
});

describe('the desired application of a live GitOpsDeployment', () => {
  test('a malformed spec is the documented invalid-spec error', async () => {
    const desired = await desiredOf({}, deployment({ type: 'manual' }), logger);
    assert.equal(desired.ok, false);
    assert.match(desired.ok ? '' : desired.message, /^the GitOpsDeployment is invalid: /);
  });

  test('an environment that does not resolve (or no resolver) is ManagedEnvironmentUnusable', async () => {
    const object = deployment({ source, type: 'manual', destination: { environment: 'prod' } });
    const unusable = { ok: false, message: GitOpsDeploymentMessage.ManagedEnvironmentUnusable };
    assert.deepEqual(await desiredOf({}, object, logger), unusable);
    assert.deepEqual(
      await desiredOf(
        { resolveEnvironment: async (): Promise<ResolvedEnvironment> => ({ ok: false }) },
        object,
        logger,
      ),
      unusable,
    );
  });

  test("a resolved environment gives its id and the destination's namespace; without one, the deployment's", async () => {
    const resolveEnvironment = async (namespace: string, name: string): Promise<ResolvedEnvironment> => {
      assert.deepEqual([namespace, name], ['jane', 'prod']);
      return { ok: true, managedEnvironmentId: 'env-1' };
    };
    const remote = await desiredOf(
      { resolveEnvironment },
      deployment({ source, type: 'manual', destination: { environment: 'prod', namespace: 'shop' } }),
      logger,
    );
    assert.ok(remote.ok);
    assert.equal(remote.managedEnvironmentId, 'env-1');
    assert.deepEqual(remote.spec.destination, { namespace: 'shop' });

    const local = await desiredOf({}, deployment({ source, type: 'manual' }), logger);
    assert.ok(local.ok);
    assert.equal(local.managedEnvironmentId, undefined);
    assert.deepEqual(local.spec.destination, { namespace: 'jane' });
  });

  test('a Kustomize namespace outside the destination is an invalid spec', async () => {
    const desired = await desiredOf(
      {},
      deployment({ source: { ...source, kustomize: { namespace: 'kube-system' } }, type: 'manual' }),
      logger,
    );
    assert.equal(desired.ok, false);
    assert.match(
      desired.ok ? '' : desired.message,
      /kustomize\.namespace must be the destination namespace jane/,
    );
  });
});

describe('rows of earlier incarnations', () => {
  test('each deleted one is an Event; one waiting for a release makes the reconcile look again', async () => {
    const events: [KubeObject, string, string, string][] = [];
    const recorder = {
      event: async (...args: [KubeObject, 'Normal' | 'Warning', string, string]) => void events.push(args),
    };
    const stale = staleRowsOf(
      { db: untouchedDb, events: recorder, liveUid: () => Promise.reject(new Error('read live')) },
      deployment({ source }),
    );
    assert.equal(stale.later(), undefined);
    const owner = { namespace: 'jane', name: 'd', uid: 'u-0' };
    await stale.deleted({
      deleted: [{ applicationId: 'a-1', applicationName: 'gitops-a-1', owner, operationId: 'o-1' }],
      waitingForRelease: 0,
    });
    assert.equal(stale.later(), undefined);
    assert.equal(events.length, 1);
    assert.equal(events[0]?.[2], DeploymentEventReason.ApplicationDeleted);
    assert.equal(events[0]?.[3], 'Deleted application gitops-a-1 from the database (operation o-1)');
    await stale.deleted({ deleted: [], waitingForRelease: 1 });
    assert.deepEqual(stale.later(), { requeueAfter: RELEASE_WAIT_MS });
  });
});
