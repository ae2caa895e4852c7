/**
 * `kubectl gitops status <namespace> | -n <namespace> | -A`: a tenant's (or every tenant's) GitOpsDeployments as the API server has them (sync, health,
 * engine instance, ErrorOccurred) next to what the database has (the application row's instance, its latest
 * operation).
 */
import { GitOpsDeploymentConditionType } from '@gitops/api';
import { type Db, getTenantInView, type TenantDeploymentInView } from '@gitops/db';
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
import {
  formatAge,
  formatStructured,
  formatTable,
  isStructured,
  type OutputFormat,
  oneLine,
} from '../output.ts';

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

/** One namespace's view: what `-o json|yaml` prints for it. */
interface NamespaceStatus {
  namespace: string;
  tenant: { placedOn: string | null } | null;
  deployments: DeploymentStatus[];
}

export const status: Command = async ({ args, options, format, ctx, io }) => {
  const [positional, ...extra] = args;
  if (extra.length > 0) throw new CliError(USAGE);
  if (options['all-namespaces'] && positional !== undefined) {
    throw new CliError(`-A/--all-namespaces and namespace ${positional}: give one of them`);
  }
  if (positional !== undefined && options.namespace !== undefined && positional !== options.namespace) {
    throw new CliError(`two namespaces: ${positional} and -n ${options.namespace}; give one`);
  }
  if (options['all-namespaces']) {
    const db = await ctx.db();
    const kc = await ctx.kube();
    const objects = await listObjects(kc, gitOpsDeploymentsPath(undefined));
    const names = [...new Set(objects.map((o) => o.metadata.namespace ?? ''))].filter(Boolean).sort();
    const views: NamespaceStatus[] = [];
    for (const namespace of names) {
      const ns = await getOrUndefined(kc, namespacePath(namespace));
      // Deleted since the list: its objects are going too.
      if (!ns?.metadata.uid) continue;
      const own = objects.filter((o) => o.metadata.namespace === namespace);
      views.push(await namespaceStatus(db, namespace, ns.metadata.uid, own));
    }
    if (isStructured(format)) {
      io.out(formatStructured(format, { namespaces: views }));
      return ExitCode.ok;
    }
    const rows = views.flatMap((v) => v.deployments.map((d) => ({ namespace: v.namespace, d })));
    if (rows.length === 0) {
      io.out('no GitOpsDeployments in any namespace');
      return ExitCode.ok;
    }
    io.out(table(rows, { format, namespaces: true }));
    return ExitCode.ok;
  }

  const namespace = positional ?? options.namespace ?? ctx.contextNamespace();
  if (!namespace) {
    throw new CliError(`${USAGE} (the kubeconfig's context names no namespace)`);
  }
  const db = await ctx.db();
  const kc = await ctx.kube();
  const ns = await getOrUndefined(kc, namespacePath(namespace));
  if (!ns?.metadata.uid) throw new CliError(`namespace ${namespace} does not exist`, ExitCode.failed);
  const objects = await listObjects(kc, gitOpsDeploymentsPath(namespace));
  const view = await namespaceStatus(db, namespace, ns.metadata.uid, objects);
  if (isStructured(format)) {
    io.out(formatStructured(format, view));
    return ExitCode.ok;
  }
  const placement = view.tenant?.placedOn ?? null;
  io.out(
    !view.tenant
      ? `namespace ${namespace}: no tenant in the database yet (nothing of it was reconciled)`
      : placement === null
        ? `namespace ${namespace}: tenant not placed on an engine instance yet`
        : `namespace ${namespace}: tenant placed on engine instance ${placement}`,
  );
  if (view.deployments.length === 0) {
    io.out('no GitOpsDeployments');
    return ExitCode.ok;
  }
  io.out(
    table(
      view.deployments.map((d) => ({ namespace, d })),
      { format, namespaces: false },
    ),
  );
  return ExitCode.ok;
};

const USAGE = 'usage: kubectl gitops status <namespace> | -n <namespace> | -A';

/** The objects of one namespace next to its tenant's rows (`getTenantInView`). */
async function namespaceStatus(
  db: Db,
  namespace: string,
  namespaceUid: string,
  objects: KubeObject[],
): Promise<NamespaceStatus> {
  const tenant = await getTenantInView(db, namespaceUid);
  const rowsByUid = new Map<string, TenantDeploymentInView>(
    (tenant?.deployments ?? []).map((d) => [d.cr_uid, d]),
  );
  const deployments: DeploymentStatus[] = [...objects]
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
    .map((object) => {
      const row = object.metadata.uid ? rowsByUid.get(object.metadata.uid) : undefined;
      if (row) rowsByUid.delete(row.cr_uid);
      return deploymentStatus(object, row, tenant?.engine_instance_name ?? null);
    });
  for (const row of rowsByUid.values()) {
    deployments.push({ ...deploymentStatus(undefined, row, null), objectGone: true });
  }
  return {
    namespace,
    tenant: tenant ? { placedOn: tenant.engine_instance_name ?? null } : null,
    deployments,
  };
}

/**
 * The table: NAMESPACE first with -A (kubectl's), APPLICATION and OPERATION (the latest operation's id) with
 * `-o wide`, which also prints messages whole.
 */
function table(
  rows: { namespace: string; d: DeploymentStatus }[],
  { format, namespaces }: { format: OutputFormat; namespaces: boolean },
): string {
  const wide = format === 'wide';
  const headers = [
    ...(namespaces ? ['NAMESPACE'] : []),
    'NAME',
    'SYNC',
    'HEALTH',
    'INSTANCE',
    'LAST OPERATION',
    'AGE',
    ...(wide ? ['APPLICATION', 'OPERATION'] : []),
    'ERROR / MESSAGE',
  ];
  return formatTable(
    headers,
    rows.map(({ namespace, d }) => {
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
        ...(namespaces ? [namespace] : []),
        d.deleting ? `${d.name} (deleting)` : d.name,
        d.sync ?? '-',
        d.health ?? '-',
        instance,
        op ? `${op.state}${op.attempts > 1 ? ` (${op.attempts} attempts)` : ''}` : '-',
        op ? formatAge(op.createdAt) : '-',
        ...(wide ? [d.application ?? '-', op?.id ?? '-'] : []),
        wide ? note.replace(/\s+/g, ' ') : oneLine(note, 90),
      ];
    }),
  );
}

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
