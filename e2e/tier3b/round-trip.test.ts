/**
 * Tier 3b: the round trip of issue 35. An Argo CD `Application` spec from Argo CD's own documentation (the
 * "Helm value files from external Git repository" example of docs/user-guide/multiple_sources.md, read from
 * the Argo CD module tools/argocd builds), converted to a GitOpsDeployment by the mapping docs/api.md
 * documents, deploys the same resources as the Application itself does in the same Argo CD. The example's
 * repositories are on the internet, which tests never reach: each repoURL is replaced by a local repository of
 * the same kind and layout (a Helm repository with the chart and version the example names, a Git repository
 * with the value file on the branch it names); nothing else is changed.
 */

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { GitOpsDeploymentSpec } from '@gitops/api';
import {
  argoCdModuleDir,
  ensureArgoCdBinary,
  type HelmRepository,
  startHelmRepository,
} from '@gitops/local-env';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { configMapChart } from '../fixture/charts.ts';
import { create, mergePatch, paths, remove } from '../fixture/kube.ts';
import { type RealSystem, startRealSystem, syncedAndHealthy } from '../fixture/real-argo-cd.ts';

type ApplicationSpec = Record<string, unknown> & {
  project?: string;
  destination?: { server?: string; name?: string; namespace?: string };
  source?: Record<string, unknown>;
  sources?: Record<string, unknown>[];
  syncPolicy?: {
    automated?: Record<string, unknown>;
    syncOptions?: string[];
    retry?: Record<string, unknown>;
  };
};

/** The YAML examples of an Argo CD documentation page that are Applications. */
async function documentedApplications(page: string): Promise<{ spec: ApplicationSpec }[]> {
  const text = await readFile(join(await argoCdModuleDir(), 'docs', page), 'utf8');
  return [...text.matchAll(/```yaml\n([\s\S]*?)```/g)]
    .flatMap((block) => parseAllDocuments(block[1] ?? '').map((d) => d.toJS() as unknown))
    .filter(
      (doc): doc is { kind: string; spec: ApplicationSpec } =>
        (doc as { kind?: unknown })?.kind === 'Application',
    );
}

/**
 * docs/api.md's mapping of an Application spec to a GitOpsDeployment spec deploying to the tenant's own
 * namespace: `project` is not applicable (the tenant's AppProject), `destination` is the GitOpsDeployment's
 * own namespace (no environment), `syncPolicy.automated` is `type: automated` (else manual), every other
 * field keeps its name; a field the table does not support fails the conversion.
 */
function toGitOpsDeploymentSpec(application: ApplicationSpec): GitOpsDeploymentSpec {
  const { project: _project, destination: _destination, syncPolicy, ...rest } = application;
  const supported = ['source', 'sources', 'ignoreDifferences', 'revisionHistoryLimit'];
  const unsupported = Object.keys(rest).filter((key) => !supported.includes(key));
  if (unsupported.length > 0) throw new Error(`not supported by the mapping: ${unsupported.join(', ')}`);
  const spec = { ...rest, type: syncPolicy?.automated ? 'automated' : 'manual' } as GitOpsDeploymentSpec;
  if (syncPolicy) spec.syncPolicy = syncPolicy as GitOpsDeploymentSpec['syncPolicy'];
  return spec;
}

/** The chart the example names, at the version it names: one ConfigMap showing the values it was given. */
const prometheusChart = (version: string) =>
  configMapChart({
    name: 'prometheus',
    version,
    values: { retention: '15d', replicas: 1 },
    configMap: 'prometheus-settings',
    data: { retention: '{{ .Values.retention | quote }}', replicas: '{{ .Values.replicas | quote }}' },
  });

describe('tier 3b: an Application of Argo CD’s documentation, as a GitOpsDeployment, deploys the same resources', () => {
  let f: RealSystem;
  let charts: HelmRepository;

  beforeAll(async () => {
    const helm = join(dirname(await ensureArgoCdBinary()), 'helm');
    charts = await startHelmRepository({ helm });
    f = await startRealSystem();
  });
  afterAll(async () => {
    await f?.stop();
    await charts?.stop();
  });

  it('the multiple-sources example with a $values file: the Application and the GitOpsDeployment render the same ConfigMap', async () => {
    // Given the documented Application (a chart of a Helm repository, its value file in a Git repository
    // named by ref)
    const [documented] = (await documentedApplications('user-guide/multiple_sources.md')).filter((a) =>
      a.spec.sources?.some((s) => s.ref === 'values'),
    );
    assert.ok(documented, 'the example is in Argo CD’s docs/user-guide/multiple_sources.md');
    const [chartSource, valuesSource] = documented.spec.sources ?? [];
    assert.ok(chartSource?.chart && valuesSource?.ref, JSON.stringify(documented.spec));
    // and local repositories in the example's shape: its chart and version, its value file on its branch
    await charts.publish(prometheusChart(String(chartSource.targetRevision)));
    const valueFile = String((chartSource.helm as { valueFiles: string[] }).valueFiles[0]).replace(
      /^\$values\//,
      '',
    );
    const values = await f.given.repository('round-trip-values', {});
    await values.commit(
      { [valueFile]: 'retention: 30d\nreplicas: 3\n' },
      'values',
      String(valuesSource.targetRevision),
    );
    const local: ApplicationSpec = {
      ...documented.spec,
      sources: [
        { ...chartSource, repoURL: charts.url },
        { ...valuesSource, repoURL: values.fileUrl },
      ],
    };

    // When the Application is created in Argo CD as documented and synced
    const direct = await f.given.tenant('round-trip-direct');
    const application = `round-trip-${direct.slice(-8)}`;
    await create(f.system.kc, paths.applications(f.system.argoCdNamespace), {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'Application',
      metadata: { name: application },
      // (the example leaves out project and destination: Argo CD's default project, this cluster)
      spec: {
        project: 'default',
        ...local,
        destination: { server: 'https://kubernetes.default.svc', namespace: direct },
      },
    });
    await mergePatch(f.system.kc, paths.application(f.system.argoCdNamespace, application), {
      operation: { initiatedBy: { username: 'round-trip-test' }, sync: {} },
    });
    // and the same spec, converted by the documented mapping, is a tenant's GitOpsDeployment, synced by a SyncRun
    const tenant = await f.given.tenant('round-trip');
    const converted = toGitOpsDeploymentSpec(local);
    assert.equal(converted.type, 'manual');
    const gd = await f.when.deployed(tenant, 'billing', undefined, {
      sources: converted.sources,
      type: converted.type,
    });
    await f.system.createSyncRun(tenant, 'first', { gitopsDeploymentName: 'billing' });

    // Then both deploy the same ConfigMap, rendered with the Git repository's value file
    const viaArgoCd = await f.expect.object(direct, 'ConfigMap', 'prometheus-settings');
    const viaService = await f.expect.object(tenant, 'ConfigMap', 'prometheus-settings');
    assert.deepEqual(viaService.data, viaArgoCd.data);
    assert.deepEqual(viaService.data, { retention: '30d', replicas: '3' });
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);

    // (the documented Application has no finalizer: deleting it leaves its ConfigMap to its namespace's end)
    await remove(f.system.kc, paths.application(f.system.argoCdNamespace, application));
  });
});
