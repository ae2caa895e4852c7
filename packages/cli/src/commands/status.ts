/**
 * `kubectl gitops status <namespace>`: a tenant's GitOpsDeployments as the API server has them (sync, health,
 * engine instance, ErrorOccurred) next to what the database has (the application row's instance, its latest
 * operation).
 */
import { GitOpsDeploymentConditionType } from '@gitops/api';
import { getTenantInView, type TenantDeploymentInView } from '@gitops/db';
import type { KubeObject } from '@gitops/shared';
import type { Command } from '../command.ts';
import { CliError, ExitCode } from '../context.ts';
import {
  conditionOf,
  conditionsOf,
  getOrUndefined,
  gitOpsDeploymentsPath,
  listObjects,
  namespacePath,
} from '../kube.ts';
import { formatAge, formatTable, oneLine, toJson } from '../output.ts';

interface DeploymentStatus {
  name: string;
  uid: string | null;
  sync: string | null;
  health: string | null;
  engineInstance: string | null;
  /** The instance still releasing the old Argo CD Application while the tenant moves. */
  releasingEngineInstance: string | null;
  error: string | null;
  /** Other conditions that are True: Argo CD's, passed through (ComparisonError, SyncError, ...). */
  conditions: { type: string; message: string }[];
  deleting: boolean;
  application: string | null;
  lastOperation: {
    id: string;
    state: string;
    createdAt: string;
    updatedAt: string;
    finishedAt: string | null;
    attempts: number;
    message: string;
  } | null;
  /** The database has rows for it, the API server no object (it was deleted and its rows are going). */
  objectGone?: true;
}

const text = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null);

export const status: Command = async ({ args, format, ctx, io }) => {
  const [namespace, ...extra] = args;
  if (!namespace || extra.length > 0) throw new CliError('usage: kubectl gitops status <namespace>');
  const db = await ctx.db();
  const kc = await ctx.kube();
  const ns = await getOrUndefined(kc, namespacePath(namespace));
  if (!ns?.metadata.uid) throw new CliError(`namespace ${namespace} does not exist`, ExitCode.failed);
  const objects = await listObjects(kc, gitOpsDeploymentsPath(namespace));
  const tenant = await getTenantInView(db, ns.metadata.uid);
  const rowsByUid = new Map<string, TenantDeploymentInView>(
    (tenant?.deployments ?? []).map((d) => [d.cr_uid, d]),
  );

  const deployments: DeploymentStatus[] = objects
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
    .map((object) => {
      const row = object.metadata.uid ? rowsByUid.get(object.metadata.uid) : undefined;
      if (row) rowsByUid.delete(row.cr_uid);
      return deploymentStatus(object, row, tenant?.engine_instance_name ?? null);
    });
  for (const row of rowsByUid.values()) {
    deployments.push({ ...deploymentStatus(undefined, row, null), objectGone: true });
  }

  const placement = tenant?.engine_instance_name ?? null;
  if (format === 'json') {
    io.out(
      toJson({
        namespace,
        tenant: tenant ? { placedOn: placement } : null,
        deployments,
      }),
    );
    return ExitCode.ok;
  }
  io.out(
    !tenant
      ? `namespace ${namespace}: no tenant in the database yet (nothing of it was reconciled)`
      : placement === null
        ? `namespace ${namespace}: tenant not placed on an engine instance yet`
        : `namespace ${namespace}: tenant placed on engine instance ${placement}`,
  );
  if (deployments.length === 0) {
    io.out('no GitOpsDeployments');
    return ExitCode.ok;
  }
  const wide = format === 'wide';
  io.out(
    formatTable(
      ['NAME', 'SYNC', 'HEALTH', 'INSTANCE', 'LAST OPERATION', 'AGE', 'ERROR / MESSAGE'],
      deployments.map((d) => {
        const op = d.lastOperation;
        const instance = d.releasingEngineInstance
          ? `${d.engineInstance ?? '-'} (from ${d.releasingEngineInstance})`
          : (d.engineInstance ?? '-');
        const note = d.objectGone
          ? 'no GitOpsDeployment: its rows are being deleted'
          : (d.error ??
            d.conditions.map((c) => `${c.type}: ${c.message}`)[0] ??
            (op && op.state !== 'Completed' ? op.message : ''));
        return [
          d.deleting ? `${d.name} (deleting)` : d.name,
          d.sync ?? '-',
          d.health ?? '-',
          instance,
          op ? `${op.state}${op.attempts > 1 ? ` (${op.attempts} attempts)` : ''}` : '-',
          op ? formatAge(op.createdAt) : '-',
          wide ? note.replace(/\s+/g, ' ') : oneLine(note, 90),
        ];
      }),
    ),
  );
  return ExitCode.ok;
};

function deploymentStatus(
  object: KubeObject | undefined,
  row: TenantDeploymentInView | undefined,
  placement: string | null,
): DeploymentStatus {
  const statusOf = (object?.status ?? {}) as {
    sync?: { status?: unknown };
    health?: { status?: unknown };
    engineInstance?: unknown;
  };
  const error = conditionOf(object, GitOpsDeploymentConditionType.ErrorOccurred);
  const op = row?.last_operation ?? null;
  return {
    name: object?.metadata.name ?? row?.cr_name ?? '?',
    uid: object?.metadata.uid ?? row?.cr_uid ?? null,
    sync: text(statusOf.sync?.status),
    health: text(statusOf.health?.status),
    engineInstance: row?.engine_instance_name ?? text(statusOf.engineInstance) ?? placement,
    releasingEngineInstance: row?.releasing_engine_instance_name ?? null,
    error: error?.status === 'True' ? (error.message ?? error.reason ?? 'ErrorOccurred') : null,
    conditions: conditionsOf(object)
      .filter((c) => c.status === 'True' && c.type !== GitOpsDeploymentConditionType.ErrorOccurred)
      .map((c) => ({ type: c.type, message: c.message ?? '' })),
    deleting: object?.metadata.deletionTimestamp !== undefined,
    application: row?.application_name ?? null,
    lastOperation: op && {
      id: op.id,
      state: op.state,
      createdAt: op.created_at.toISOString(),
      updatedAt: op.updated_at.toISOString(),
      finishedAt: op.finished_at?.toISOString() ?? null,
      attempts: op.attempts,
      message: op.message,
    },
  };
}
