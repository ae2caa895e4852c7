/**
 * What must hold once the faults have stopped, read through the API server and the database the way a user
 * (or an operator) would look: each check returns the problems it found, none when the system converged.
 *
 * - every live GitOpsDeployment has exactly one Argo CD Application that matches its latest spec, reports
 *   Synced/Healthy at its repository's head for that spec, and its resources exist (the ConfigMap with the
 *   version its spec names); a manual one's latest SyncRun Succeeded (or failed in Argo CD itself, which it
 *   then reports as Argo CD said it);
 * - every deleted one left no Application and no resource;
 * - no operation is waiting or in progress (operation rows, SyncRun syncs, Operation CRs), every live
 *   SyncRun and PromotionRun is finished (the PromotionRuns Complete/Success);
 * - every Argo CD object of the service has an owner (Application → live GitOpsDeployment, cluster Secret →
 *   live ManagedEnvironment, repository Secret → live RepositoryCredential, AppProject → a tenant with
 *   something left) and none is duplicated (one application row and mapping per deployment, one cluster
 *   Secret per environment, two repository Secrets per credential);
 * - every such object is on the engine instance of its tenant, and only there (no Application on both Argo
 *   CDs, nothing left on the instance a tenant moved away from, no release pending); each tenant the test
 *   moved is on the instance its label names last, and its deployments say so in status.engineInstance;
 * - every ManagedEnvironment is connected and every RepositoryCredential valid;
 * - the four processes are ready.
 */
import { AppStudioKinds } from '@gitops/api';
import { collectionPath, type KubeObject } from '@gitops/shared';
import { type ArgoApplication, type GitOpsDeployment, list, paths } from '../fixture/kube.ts';
import type { ChurnPlan } from './churn.ts';
import { configMapName, gitopsPath, syncFailedInArgoCd } from './churn.ts';
import { type ChaosEnvironment, SERVICES } from './harness.ts';

type Conditions = { type: string; status: string; reason?: string; message?: string }[];
interface WithStatus extends KubeObject {
  status?: Record<string, unknown> & { conditions?: Conditions };
}
type ConfigMap = KubeObject & { data?: Record<string, string> };

export interface Snapshot {
  problems: string[];
  live: number;
  applications: number;
}

const conditionTrue = (conditions: Conditions | undefined, type: string) =>
  conditions?.some((c) => c.type === type && c.status === 'True') ?? false;

export async function checkInvariants(env: ChaosEnvironment, plan: ChurnPlan): Promise<Snapshot> {
  const { system } = env;
  const kc = system.kc;
  const argoNamespaces = [system.argoCdNamespace, system.secondArgoCdNamespace];
  const problems: string[] = [];
  const problem = (text: string) => problems.push(text);
  /** Every object of the service's Argo CDs of one kind, from both instances. */
  const fromBothInstances = async <T extends KubeObject>(pathOf: (namespace: string) => string) =>
    (await Promise.all(argoNamespaces.map((ns) => list<T>(kc, pathOf(ns))))).flat();

  const [gds, apps, configMaps, syncRuns, environments, credentials, secrets, projects, operationCrs] =
    await Promise.all([
      list<GitOpsDeployment>(kc, gitopsPath('gitopsdeployments')),
      fromBothInstances<ArgoApplication>((ns) => paths.applications(ns)),
      list<ConfigMap>(kc, '/api/v1/configmaps'),
      list<WithStatus>(kc, gitopsPath('gitopsdeploymentsyncruns')),
      list<WithStatus>(kc, gitopsPath('gitopsdeploymentmanagedenvironments')),
      list<WithStatus>(kc, gitopsPath('gitopsdeploymentrepositorycredentials')),
      fromBothInstances<KubeObject>((ns) => `/api/v1/namespaces/${ns}/secrets`),
      fromBothInstances<KubeObject>((ns) => paths.appProject(ns, '').replace(/\/$/, '')),
      fromBothInstances<KubeObject>((ns) => paths.operations(ns)),
    ]);
  const promotionRuns = await list<WithStatus>(
    kc,
    collectionPath({ ...AppStudioKinds.PromotionRun.resource, namespace: plan.appStudioTenant }),
  );
  const appByName = new Map(apps.map((a) => [a.metadata.name, a]));
  const configMap = (namespace: string, name: string) =>
    configMaps.find((c) => c.metadata.namespace === namespace && c.metadata.name === name);
  const liveUids = new Set(gds.map((g) => g.metadata.uid ?? ''));
  const syncRunOf = (namespace: string, name: string) =>
    syncRuns.find((r) => r.metadata.namespace === namespace && r.metadata.name === name);

  // Every live GitOpsDeployment, whoever made it (the App Studio ones too).
  for (const gd of gds) {
    const id = `GitOpsDeployment ${gd.metadata.namespace}/${gd.metadata.name}`;
    if (gd.metadata.deletionTimestamp) {
      problem(`${id} is still being deleted`);
      continue;
    }
    const app = appByName.get(`gitopsdepl-${gd.metadata.uid}`);
    if (!app) {
      problem(`${id} has no Application`);
      continue;
    }
    if (app.metadata.deletionTimestamp) problem(`${id}: its Application is being deleted`);
    // The churn's deployments each have one source (spec.source).
    const want = gd.spec.source ?? { repoURL: '' };
    const got = app.spec.source;
    if (
      got.repoURL !== want.repoURL ||
      got.path !== want.path ||
      (got.targetRevision ?? '') !== (want.targetRevision ?? '')
    )
      problem(`${id}: Application source ${JSON.stringify(got)} ≠ spec ${JSON.stringify(want)}`);
    const namespace = gd.spec.destination?.namespace || gd.metadata.namespace;
    if (app.spec.destination.namespace !== namespace)
      problem(`${id}: Application destination ${app.spec.destination.namespace} ≠ ${namespace}`);
    if (Boolean(app.spec.syncPolicy?.automated) !== (gd.spec.type === 'automated'))
      problem(`${id}: Application sync policy does not match type ${gd.spec.type}`);
    const status = gd.status ?? {};
    if (status.sync?.status !== 'Synced' || status.health?.status !== 'Healthy') {
      problem(
        `${id} is ${status.sync?.status}/${status.health?.status} (${JSON.stringify(status.conditions ?? [])})`,
      );
      continue;
    }
    if (status.reconciledState?.source?.path !== want.path)
      problem(`${id}: status reports path ${status.reconciledState?.source?.path}, spec says ${want.path}`);
    const head = plan.heads.get(want.repoURL);
    if (head && status.sync.revision !== head)
      problem(`${id}: synced ${status.sync.revision}, head is ${head}`);
    const resources = (status.resources ?? []) as { kind?: string; namespace?: string; name?: string }[];
    if (resources.length === 0) problem(`${id} reports no resources`);
    for (const r of resources) {
      if (r.kind !== 'ConfigMap') {
        problem(`${id}: unexpected resource ${r.kind} ${r.name}`);
      } else if (!configMap(r.namespace ?? '', r.name ?? '')) {
        problem(`${id}: its ConfigMap ${r.namespace}/${r.name} does not exist`);
      }
    }
  }

  // The test's own deployments: what each must look like after what the test did to it.
  for (const d of plan.deployments) {
    if (d.uid === undefined) {
      problem(`app-${d.index} was never created`);
      continue;
    }
    const id = `GitOpsDeployment ${d.namespace}/${d.name}`;
    const gd = gds.find((g) => g.metadata.uid === d.uid);
    for (const uid of d.previousUids) {
      if (gds.some((g) => g.metadata.uid === uid))
        problem(`${id}: the object ${uid} it replaced still exists`);
      if (appByName.has(`gitopsdepl-${uid}`))
        problem(`${id}: the Application of the object ${uid} it replaced remains`);
    }
    const current = configMapName(d.index, d.version);
    const cm = configMap(d.destinationNamespace, current);
    // What no version of it may have left: every ConfigMap once it is deleted, v1/v2's once re-created.
    const leftovers = d.deleted
      ? [configMapName(d.index, 'v1'), configMapName(d.index, 'v3')]
      : d.version === 'v3'
        ? [configMapName(d.index, 'v1')]
        : [];
    for (const name of leftovers)
      if (configMap(d.destinationNamespace, name))
        problem(
          `${id} (${d.deleted ? 'deleted' : 're-created'}): its former ConfigMap ${d.destinationNamespace}/${name} remains`,
        );
    if (d.deleted) {
      if (gd) problem(`${id} was deleted but still exists`);
      if (appByName.has(`gitopsdepl-${d.uid}`)) problem(`${id} was deleted but its Application remains`);
      continue;
    }
    if (!gd) {
      problem(`${id} is gone, but the test never deleted it`);
      continue;
    }
    if (gd.spec.source?.path !== `apps/${d.index}/${d.version}`)
      problem(`${id}: spec path is ${gd.spec.source?.path}`);
    if (cm?.data?.version !== d.version)
      problem(
        `${id}: ConfigMap ${d.destinationNamespace}/${current} has ${cm ? cm.data?.version : 'nothing'}, want ${d.version}`,
      );
    const latest = d.syncRuns.at(-1);
    if (latest) {
      const status = syncRunOf(d.namespace, latest)?.status as
        | { phase?: string; startedAt?: string; conditions?: { type?: string; message?: string }[] }
        | undefined;
      const error = status?.conditions?.find((c) => c.type === 'ErrorOccurred')?.message ?? '';
      // A sync Argo CD ran and ended in error itself is truthfully Failed (syncFailedInArgoCd); the test then
      // asks again as a user would (retryFailedSyncs), and the deployment's state is checked above. Anything
      // else must have Succeeded.
      if (status?.phase !== 'Succeeded' && !syncFailedInArgoCd(status))
        problem(`${id}: its latest SyncRun ${latest} is ${status?.phase} (${error})`);
    }
  }

  // Nothing waits or runs.
  for (const run of syncRuns) {
    const status = run.status as { phase?: string; message?: string } | undefined;
    if (!['Succeeded', 'Failed', 'Terminated'].includes(status?.phase ?? ''))
      problem(
        `SyncRun ${run.metadata.namespace}/${run.metadata.name} is ${status?.phase} (${JSON.stringify(run.status?.conditions)})`,
      );
  }
  for (const name of plan.promotionRuns) {
    const run = promotionRuns.find((r) => r.metadata.name === name);
    const status = run?.status as { state?: string; completionResult?: string } | undefined;
    if (status?.state !== 'Complete' || status.completionResult !== 'Success')
      problem(`PromotionRun ${name} is ${status?.state}/${status?.completionResult}`);
  }
  const db = system.db;
  const openOperations = await db
    .selectFrom('operation')
    .select(['id', 'resource_type', 'state', 'message'])
    .where('state', 'in', ['Waiting', 'In_Progress'])
    .execute();
  for (const o of openOperations)
    problem(`operation ${o.id} (${o.resource_type}) is ${o.state}: ${o.message}`);
  const openSyncs = await db
    .selectFrom('sync_operation')
    .select(['id', 'deployment_name', 'argocd_phase'])
    .where('outcome', 'is', null)
    .execute();
  for (const s of openSyncs)
    problem(`the sync of ${s.deployment_name} (${s.id}) has no outcome (Argo CD: ${s.argocd_phase})`);
  for (const o of operationCrs) problem(`Operation CR ${o.metadata.name} remains`);

  // Every Argo CD object has an owner, and none is duplicated.
  for (const app of apps) {
    const uid = app.metadata.name.replace(/^gitopsdepl-/, '');
    if (!liveUids.has(uid)) problem(`Application ${app.metadata.name} has no live GitOpsDeployment`);
  }
  const mappings = await db.selectFrom('api_cr_mapping').selectAll().execute();
  const applicationRows = await db.selectFrom('application').select(['id', 'name']).execute();
  const liveMappings = (kind: string, live: KubeObject[]) => {
    const uids = new Set(live.map((o) => o.metadata.uid));
    return mappings.filter((m) => m.cr_kind === kind && uids.has(m.cr_uid));
  };
  const deploymentMappings = mappings.filter((m) => m.cr_kind === 'GitOpsDeployment');
  for (const gd of gds) {
    const count = deploymentMappings.filter((m) => m.cr_uid === gd.metadata.uid).length;
    if (count !== 1)
      problem(`GitOpsDeployment ${gd.metadata.namespace}/${gd.metadata.name} has ${count} mapping rows`);
  }
  for (const m of deploymentMappings)
    if (!liveUids.has(m.cr_uid))
      problem(`a mapping row of deleted GitOpsDeployment ${m.cr_namespace}/${m.cr_name} remains`);
  if (applicationRows.length !== gds.length)
    problem(`${applicationRows.length} application rows for ${gds.length} GitOpsDeployments`);

  const liveEnvironments = environments.filter((e) => !e.metadata.deletionTimestamp);
  const liveCredentials = credentials.filter((c) => !c.metadata.deletionTimestamp);
  const environmentIds = new Set(
    liveMappings('GitOpsDeploymentManagedEnvironment', liveEnvironments).map((m) => m.managed_environment_id),
  );
  const credentialIds = new Set(
    liveMappings('GitOpsDeploymentRepositoryCredential', liveCredentials).map(
      (m) => m.repository_credentials_id,
    ),
  );
  const typeOf = (s: KubeObject) => s.metadata.labels?.['argocd.argoproj.io/secret-type'];
  const clusterSecrets = secrets.filter((s) => typeOf(s) === 'cluster');
  const repositorySecrets = secrets.filter((s) => typeOf(s) === 'repository');
  for (const s of clusterSecrets) {
    const id = s.metadata.name.replace(/^managed-env-/, '');
    if (!environmentIds.has(id)) problem(`cluster Secret ${s.metadata.name} has no live ManagedEnvironment`);
  }
  if (clusterSecrets.length !== liveEnvironments.length)
    problem(`${clusterSecrets.length} cluster Secrets for ${liveEnvironments.length} ManagedEnvironments`);
  for (const s of repositorySecrets) {
    const id = s.metadata.name.replace(/^repo-cred-/, '').replace(/-cluster$/, '');
    if (!credentialIds.has(id))
      problem(`repository Secret ${s.metadata.name} has no live RepositoryCredential`);
  }
  if (repositorySecrets.length !== 2 * liveCredentials.length)
    problem(
      `${repositorySecrets.length} repository Secrets for ${liveCredentials.length} RepositoryCredentials`,
    );
  const tenants = await db.selectFrom('cluster_user').select(['id', 'namespace_name']).execute();
  const tenantsInUse = new Set(
    [...gds, ...liveEnvironments, ...liveCredentials].map((o) => o.metadata.namespace ?? ''),
  );
  for (const p of projects) {
    if (p.metadata.name === 'default') continue;
    const tenantId = /^app-project-(.+?)(-cluster)?$/.exec(p.metadata.name)?.[1];
    const tenant = tenants.find((t) => t.id === tenantId);
    if (!tenant || !tenantsInUse.has(tenant.namespace_name))
      problem(`AppProject ${p.metadata.name} belongs to no tenant with anything left`);
  }

  // Everything of a tenant is on its instance, and only there.
  const instanceRows = await db
    .selectFrom('engine_instance')
    .select(['id', 'name', 'namespace_name'])
    .execute();
  const instanceById = new Map(instanceRows.map((i) => [i.id, i]));
  const tenantRows = await db
    .selectFrom('cluster_user')
    .select(['id', 'namespace_name', 'engine_instance_id'])
    .execute();
  const tenantByNamespace = new Map(tenantRows.map((t) => [t.namespace_name, t]));
  const argoNamespaceOfTenant = (tenantId: string | undefined) =>
    instanceById.get(tenantRows.find((t) => t.id === tenantId)?.engine_instance_id ?? '')?.namespace_name;
  const seenApplications = new Map<string, string>();
  for (const app of apps) {
    const where = app.metadata.namespace ?? '';
    const before = seenApplications.get(app.metadata.name);
    if (before !== undefined)
      problem(`Application ${app.metadata.name} is on both instances (${before}, ${where})`);
    seenApplications.set(app.metadata.name, where);
    const tenantId = app.metadata.labels?.['managed-gitops.redhat.com/cluster-user-id'];
    const home = argoNamespaceOfTenant(tenantId);
    if (home !== where)
      problem(`Application ${app.metadata.name} is in ${where}, its tenant's instance is ${home}`);
  }
  const releasing = await db
    .selectFrom('application')
    .select(['name', 'releasing_engine_instance_id'])
    .where('releasing_engine_instance_id', 'is not', null)
    .execute();
  for (const r of releasing) problem(`application ${r.name} is still being released by its former instance`);
  for (const gd of gds) {
    const tenant = tenantByNamespace.get(gd.metadata.namespace ?? '');
    const instance = instanceById.get(tenant?.engine_instance_id ?? '')?.name;
    const reported = (gd.status as { engineInstance?: string } | undefined)?.engineInstance;
    if (reported !== instance)
      problem(
        `GitOpsDeployment ${gd.metadata.namespace}/${gd.metadata.name} reports engine instance ${reported}, its tenant is on ${instance}`,
      );
  }
  for (const [namespace, expected] of plan.placements) {
    const tenant = tenantByNamespace.get(namespace);
    const placed = instanceById.get(tenant?.engine_instance_id ?? '')?.name;
    if (tenant && placed !== expected)
      problem(`tenant ${namespace} is on ${placed}, its label names ${expected}`);
  }
  const environmentTenant = new Map(
    (await db.selectFrom('managed_environment').select(['id', 'cluster_user_id']).execute()).map((e) => [
      e.id,
      e.cluster_user_id,
    ]),
  );
  const credentialTenant = new Map(
    (await db.selectFrom('repository_credentials').select(['id', 'cluster_user_id']).execute()).map((c) => [
      c.id,
      c.cluster_user_id,
    ]),
  );
  for (const secret of clusterSecrets) {
    const home = argoNamespaceOfTenant(
      environmentTenant.get(secret.metadata.name.replace(/^managed-env-/, '')),
    );
    if (home !== secret.metadata.namespace)
      problem(
        `cluster Secret ${secret.metadata.name} is in ${secret.metadata.namespace}, its tenant's instance is ${home}`,
      );
  }
  for (const secret of repositorySecrets) {
    const id = secret.metadata.name.replace(/^repo-cred-/, '').replace(/-cluster$/, '');
    const home = argoNamespaceOfTenant(credentialTenant.get(id));
    if (home !== secret.metadata.namespace)
      problem(
        `repository Secret ${secret.metadata.name} is in ${secret.metadata.namespace}, its tenant's instance is ${home}`,
      );
  }
  for (const p of projects) {
    if (p.metadata.name === 'default') continue;
    const tenantId = /^app-project-(.+?)(-cluster)?$/.exec(p.metadata.name)?.[1];
    const home = argoNamespaceOfTenant(tenantId);
    if (home !== undefined && home !== p.metadata.namespace)
      problem(
        `AppProject ${p.metadata.name} is in ${p.metadata.namespace}, its tenant's instance is ${home}`,
      );
  }

  // The user's view of environments and credentials.
  for (const e of liveEnvironments) {
    if (!conditionTrue(e.status?.conditions, 'ConnectionInitializationSucceeded'))
      problem(
        `ManagedEnvironment ${e.metadata.namespace}/${e.metadata.name} is not connected: ${JSON.stringify(e.status?.conditions)}`,
      );
  }
  for (const c of liveCredentials) {
    if (
      conditionTrue(c.status?.conditions, 'ErrorOccurred') ||
      !conditionTrue(c.status?.conditions, 'ValidRepositoryCredential')
    )
      problem(
        `RepositoryCredential ${c.metadata.namespace}/${c.metadata.name}: ${JSON.stringify(c.status?.conditions)}`,
      );
  }
  for (const e of plan.environments)
    if (
      e.deleted &&
      liveEnvironments.some((x) => x.metadata.namespace === e.namespace && x.metadata.name === e.name)
    )
      problem(`ManagedEnvironment ${e.namespace}/${e.name} was deleted but remains`);
  for (const c of plan.credentials)
    if (
      c.deleted &&
      liveCredentials.some((x) => x.metadata.namespace === c.namespace && x.metadata.name === c.name)
    )
      problem(`RepositoryCredential ${c.namespace}/${c.name} was deleted but remains`);

  // The processes.
  for (const name of SERVICES) if (!(await system.isReady(name))) problem(`${name} is not ready`);

  return { problems, live: gds.length, applications: apps.length };
}
