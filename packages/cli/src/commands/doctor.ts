/**
 * `kubectl gitops doctor`: checks an installation end to end, one line per check, `OK`, `WARN`, `SKIP` or
 * `FAIL` with a one-line reason: the API server, our CRDs (installed and Established, compared with
 * packages/api/crds), the database and its migrations, the encryption keys (configured, and able to open the
 * values stored under each key id), and each engine instance (an agent listening, its GitOpsEngineInstance,
 * and the Argo CD settings the cluster-agent needs when this kubeconfig reaches the instance's cluster:
 * docs/api.md#argo-cd-settings-this-service-needs). Exit code 1 when a check fails, 2 when the database or the
 * API server could not be checked at all (not configured or unreachable).
 */
import { EngineInstanceConditionType, loadCrds } from '@gitops/api';
import {
  type Db,
  type EngineInstanceOverview,
  listEngineInstanceOverviews,
  listSealedKeyUsage,
  pendingMigrations,
  type Sealer,
  SealingError,
  sealedColumnName,
} from '@gitops/db';
import { clusterIdentity, HttpMethod, type KubeConfig, kubeRequest } from '@gitops/shared';
import type { Command } from '../command.ts';
import { CliError, ExitCode } from '../context.ts';
import { conditionOf, configMapPath, crdPath, engineInstancePath, getOrUndefined } from '../kube.ts';
import { formatStructured, isStructured } from '../output.ts';

/** What the cluster-agent reads at start (packages/cluster-agent/src/argocd-settings.ts; docs/api.md). */
const ARGOCD_CMD_PARAMS_CONFIGMAP = 'argocd-cmd-params-cm';
const PERSIST_RESOURCE_HEALTH_KEY = 'controller.resource.health.persist';
const ARGOCD_CM = 'argocd-cm';
const RESPECT_RBAC_KEY = 'resource.respectRBAC';

export type CheckStatus = 'OK' | 'WARN' | 'SKIP' | 'FAIL';

export interface Check {
  name: string;
  status: CheckStatus;
  reason: string;
}

function reasonOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export const doctor: Command = async ({ args, format, ctx, io }) => {
  if (args.length > 0) throw new CliError('usage: kubectl gitops doctor');
  const checks: Check[] = [];
  const check = (name: string, status: CheckStatus, reason: string) => {
    checks.push({ name, status, reason });
    if (!isStructured(format)) io.out(`${status.padEnd(4)}  ${name}: ${reason}`);
  };
  let unreachable = false;
  const markUnreachable = () => {
    unreachable = true;
  };

  const kc = await reach('api-server', () => ctx.kube(), check, markUnreachable);
  if (kc) {
    const version = (await kubeRequest(kc, { method: HttpMethod.GET, path: '/version' })) as {
      gitVersion?: string;
    };
    check('api-server', 'OK', `${ctx.apiServer()} answers (Kubernetes ${version.gitVersion ?? 'unknown'})`);
    await checkCrds(kc, check);
  }

  const db = await reach('database', () => ctx.db(), check, markUnreachable);
  if (db) {
    check('database', 'OK', 'reachable');
    const pending = await pendingMigrations(db);
    if (pending.length === 0) check('migrations', 'OK', 'every migration of this version is applied');
    else
      check(
        'migrations',
        'FAIL',
        `${pending.length} pending (${pending.join(', ')}): start the backend of this version, it migrates at start`,
      );
  }

  let sealer: Sealer | undefined;
  try {
    sealer = ctx.sealer();
    const keys = ctx.encryptionKeys();
    check(
      'encryption-keys',
      'OK',
      `${keys.keys.length} configured (${keys.keys.map((k) => `'${k.id}'`).join(', ')}), active '${keys.activeKeyId}'`,
    );
  } catch (err) {
    check('encryption-keys', 'FAIL', reasonOf(err));
  }
  if (db && sealer) await checkSealedValues(db, sealer, check);

  if (db) await checkEngineInstances(db, kc, check);

  const failed = checks.filter((c) => c.status === 'FAIL').length;
  const code = unreachable ? ExitCode.cannotRun : failed > 0 ? ExitCode.failed : ExitCode.ok;
  if (isStructured(format)) io.out(formatStructured(format, { ok: code === ExitCode.ok, checks }));
  else io.out(failed === 0 ? 'all checks passed' : `${failed} check${failed === 1 ? '' : 's'} failed`);
  return code;
};

/** Connects, or records a FAIL (the reason is the CliError's one line) and returns undefined. */
async function reach<T>(
  name: string,
  connect: () => Promise<T>,
  check: (name: string, status: CheckStatus, reason: string) => void,
  onUnreachable: () => void,
): Promise<T | undefined> {
  try {
    return await connect();
  } catch (err) {
    if (!(err instanceof CliError)) throw err;
    check(name, 'FAIL', err.message);
    onUnreachable();
    return undefined;
  }
}

type Report = (name: string, status: CheckStatus, reason: string) => void;

async function checkCrds(kc: KubeConfig, check: Report): Promise<void> {
  for (const crd of await loadCrds()) {
    const name = crd.metadata.name;
    const versions = crd.spec.versions.filter((v) => v.served).map((v) => v.name);
    let live: Awaited<ReturnType<typeof getOrUndefined>>;
    try {
      live = await getOrUndefined(kc, crdPath(name));
    } catch (err) {
      check(`crd ${name}`, 'FAIL', `cannot read it: ${reasonOf(err)}`);
      continue;
    }
    if (!live) {
      check(`crd ${name}`, 'FAIL', 'not installed (kubectl apply -k manifests/crds)');
      continue;
    }
    const established = conditionOf(live, 'Established');
    const served = ((live.spec as { versions?: { name: string; served?: boolean }[] }).versions ?? [])
      .filter((v) => v.served)
      .map((v) => v.name);
    const missing = versions.filter((v) => !served.includes(v));
    if (established?.status !== 'True') {
      check(
        `crd ${name}`,
        'FAIL',
        `not Established: ${established?.message ?? 'no Established condition yet'}`,
      );
    } else if (missing.length > 0) {
      check(
        `crd ${name}`,
        'FAIL',
        `does not serve ${missing.join(', ')} (an older CRD? apply manifests/crds)`,
      );
    } else {
      check(`crd ${name}`, 'OK', `Established, serves ${served.join(', ')}`);
    }
  }
}

async function checkSealedValues(db: Db, sealer: Sealer, check: Report): Promise<void> {
  const usage = await listSealedKeyUsage(db);
  if (usage.length === 0) {
    check('sealed-values', 'OK', 'no sealed value is stored yet');
    return;
  }
  const byKey = new Map<string | null, typeof usage>();
  for (const u of usage) byKey.set(u.keyId, [...(byKey.get(u.keyId) ?? []), u]);
  for (const [keyId, uses] of byKey) {
    const count = uses.reduce((n, u) => n + u.count, 0);
    const where = uses.map((u) => sealedColumnName(u.column)).join(', ');
    const name = `sealed-values ${keyId === null ? '(malformed)' : `'${keyId}'`}`;
    let failure: string | undefined;
    for (const u of uses) {
      try {
        sealer.open(u.sample.value, u.column.context).fill(0);
      } catch (err) {
        if (!(err instanceof SealingError)) throw err;
        failure = `${sealedColumnName(u.column)} row ${u.sample.id} does not open: ${err.code}${err.code === 'UNKNOWN_KEY' ? ' (that key is not in GITOPS_ENCRYPTION_KEYS)' : ''}`;
        break;
      }
    }
    if (failure) check(name, 'FAIL', `${count} values (${where}); ${failure}`);
    else if (keyId !== sealer.activeKeyId)
      check(
        name,
        'WARN',
        `${count} values (${where}) are sealed under a key that is not the active one: run kubectl gitops reseal before removing it`,
      );
    else check(name, 'OK', `${count} values (${where}) under the active key; a sample of each column opens`);
  }
}

async function checkEngineInstances(db: Db, kc: KubeConfig | undefined, check: Report): Promise<void> {
  const instances = await listEngineInstanceOverviews(db);
  if (instances.length === 0) {
    check(
      'engine-instances',
      'WARN',
      'none registered: no cluster-agent (or backend) has started with this database',
    );
    return;
  }
  const ownCluster = kc ? await clusterIdentity(kc) : undefined;
  for (const instance of instances) {
    const name = `instance ${instance.name}`;
    if (instance.listening) {
      check(
        name,
        'OK',
        `an agent listens (${instance.agents} agent process${instance.agents === 1 ? '' : 'es'}); ${instance.tenants} tenants, ${instance.applications} applications${instance.cordoned ? '; cordoned' : ''}`,
      );
    } else {
      check(
        name,
        'FAIL',
        `no agent listens (${instance.agents} agent processes connected): its ${instance.tenants} tenants' changes wait; start its cluster-agent (ENGINE_INSTANCE_NAME=${instance.name}, ARGOCD_NAMESPACE=${instance.namespace_name})`,
      );
    }
    if (!kc) continue;
    await checkEngineInstanceObject(kc, instance, check);
    if (instance.cluster_identity !== ownCluster) {
      check(
        `argocd ${instance.name}`,
        'SKIP',
        `on another cluster (${instance.cluster_identity}) than this kubeconfig reaches: check its Argo CD settings there`,
      );
      continue;
    }
    await checkArgoCdSettings(kc, instance, check);
  }
}

async function checkEngineInstanceObject(kc: KubeConfig, instance: EngineInstanceOverview, check: Report) {
  const name = `gitopsengineinstance ${instance.name}`;
  try {
    const object = await getOrUndefined(kc, engineInstancePath(instance.name));
    if (!object) {
      check(
        name,
        'WARN',
        'missing: the backend creates one per registered instance within 15 s (is a backend running?)',
      );
      return;
    }
    const available = conditionOf(object, EngineInstanceConditionType.Available);
    check(
      name,
      'OK',
      `exists (Available ${available?.status ?? 'unknown'}${available?.reason ? `, ${available.reason}` : ''})`,
    );
  } catch (err) {
    check(name, 'WARN', `cannot read it: ${reasonOf(err)}`);
  }
}

async function checkArgoCdSettings(kc: KubeConfig, instance: EngineInstanceOverview, check: Report) {
  const namespace = instance.namespace_name;
  const name = `argocd ${instance.name}`;
  const read = async (configMap: string) => {
    try {
      const object = await getOrUndefined(kc, configMapPath(namespace, configMap));
      return {
        data: (object as { data?: Record<string, string> } | undefined)?.data,
        exists: object !== undefined,
      };
    } catch (err) {
      return { error: reasonOf(err) };
    }
  };
  const params = await read(ARGOCD_CMD_PARAMS_CONFIGMAP);
  if ('error' in params) {
    check(name, 'FAIL', `cannot read ${namespace}/${ARGOCD_CMD_PARAMS_CONFIGMAP}: ${params.error}`);
  } else if (!params.exists) {
    check(
      name,
      'FAIL',
      `${namespace}/${ARGOCD_CMD_PARAMS_CONFIGMAP} does not exist: set ${PERSIST_RESOURCE_HEALTH_KEY}: "true" in it (is Argo CD installed in ${namespace}?)`,
    );
  } else if (String(params.data?.[PERSIST_RESOURCE_HEALTH_KEY] ?? '').trim() !== 'true') {
    check(
      name,
      'FAIL',
      `${namespace}/${ARGOCD_CMD_PARAMS_CONFIGMAP} lacks ${PERSIST_RESOURCE_HEALTH_KEY}: "true" (status.resources would carry no health); set it and restart the application controller`,
    );
  } else {
    check(name, 'OK', `${ARGOCD_CMD_PARAMS_CONFIGMAP} ${PERSIST_RESOURCE_HEALTH_KEY}: "true"`);
  }
  const cm = await read(ARGOCD_CM);
  if ('error' in cm) check(`${name} rbac`, 'WARN', `cannot read ${namespace}/${ARGOCD_CM}: ${cm.error}`);
  else if (String(cm.data?.[RESPECT_RBAC_KEY] ?? '').trim() !== 'normal')
    check(
      `${name} rbac`,
      'WARN',
      `${namespace}/${ARGOCD_CM} lacks ${RESPECT_RBAC_KEY}: normal: ManagedEnvironments with namespace-limited tokens will not sync`,
    );
  else check(`${name} rbac`, 'OK', `${ARGOCD_CM} ${RESPECT_RBAC_KEY}: normal`);
}
