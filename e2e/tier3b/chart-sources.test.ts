/**
 * Tier 3b: other kinds of source with a real Argo CD (issue 35 item 4; docs/api.md, GitOpsDeployment): a
 * chart of a Helm repository served locally (`helm package` + `helm repo index` behind a static HTTP server),
 * a chart of an OCI registry served locally (Debian's docker-registry, `helm push`), and two sources, one
 * lending a values file to the other by its `ref`. Argo CD's repo-server renders each with the `helm` that
 * tools/argocd/build.sh builds beside it; the tests use the same `helm` to package and push.
 */

import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import {
  ensureArgoCdBinary,
  type Files,
  type HelmRepository,
  type OciRegistry,
  startHelmRepository,
  startOciRegistry,
} from '@gitops/local-env';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  type DeploymentStatus,
  type RealSystem,
  startRealSystem,
  syncedAndHealthy,
} from '../fixture/real-argo-cd.ts';

/** A chart `settings` at `version`, whose one ConfigMap shows its version and two values. */
const settingsChart = (version: string): Files => ({
  'Chart.yaml': ['apiVersion: v2', 'name: settings', `version: ${version}`, ''].join('\n'),
  'values.yaml': ['greeting: from-chart-defaults', 'color: grey', ''].join('\n'),
  'templates/configmap.yaml': [
    'apiVersion: v1',
    'kind: ConfigMap',
    'metadata:',
    '  name: {{ .Release.Name }}-settings',
    'data:',
    '  version: {{ .Chart.Version | quote }}',
    '  greeting: {{ .Values.greeting | quote }}',
    '  color: {{ .Values.color | quote }}',
    '',
  ].join('\n'),
});

/** The True conditions of `type` whose message matches `pattern`. */
const saying = (status: DeploymentStatus, type: string, pattern: RegExp) =>
  (status.conditions ?? []).filter(
    (c) => c.type === type && c.status === 'True' && pattern.test(c.message ?? ''),
  );

describe('tier 3b: charts of Helm repositories and OCI registries, and several sources, with a real Argo CD', () => {
  let f: RealSystem;
  let charts: HelmRepository;
  let registry: OciRegistry;

  beforeAll(async () => {
    const helm = join(dirname(await ensureArgoCdBinary()), 'helm');
    charts = await startHelmRepository({ helm });
    await charts.publish(settingsChart('0.1.0'));
    await charts.publish(settingsChart('0.2.0'));
    registry = await startOciRegistry({ helm });
    // Argo CD's repo-server trusts the registry's certificate for its host, as it would a Git server's.
    f = await startRealSystem({ trustedCertificates: { '127.0.0.1': registry.certificate } });
  });
  afterAll(async () => {
    await f?.stop();
    await registry?.stop();
    await charts?.stop();
  });

  it('deploys a chart of a Helm repository at the version targetRevision names, follows a new version, and reports a version the repository does not have', async ({
    annotate,
  }) => {
    // Given a Helm repository with versions 0.1.0 and 0.2.0 of a chart
    const tenant = await f.given.tenant('chart-repo');

    // When the tenant deploys version 0.1.0 of the chart with a parameter
    const gd = await f.when.deployed(tenant, 'settings', {
      repoURL: charts.url,
      chart: 'settings',
      targetRevision: '0.1.0',
      helm: { releaseName: 'shop', parameters: [{ name: 'color', value: 'blue' }] },
    });

    // Then that version is rendered with the parameter
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    const first = await f.expect.object(tenant, 'ConfigMap', 'shop-settings');
    assert.deepEqual(first.data, { version: '0.1.0', greeting: 'from-chart-defaults', color: 'blue' });

    // When the user names the next version
    await f.when.edited(gd, { source: { targetRevision: '0.2.0' } });

    // Then it replaces the first
    const second = await f.expect.object(
      tenant,
      'ConfigMap',
      'shop-settings',
      (cm) => cm.data?.version === '0.2.0',
    );
    assert.deepEqual(second.data, { ...first.data, version: '0.2.0' });
    await f.expect.deployment(gd).is('Synced/Healthy again', syncedAndHealthy);

    // When the user names a version the repository does not have
    await f.when.edited(gd, { source: { targetRevision: '9.9.9' } });

    // Then Argo CD's error naming it is a condition of the GitOpsDeployment, and what was deployed stays
    const missing = /9\.9\.9/;
    const status = await f.expect
      .deployment(gd)
      .is("Argo CD's ComparisonError", (s) => saying(s, 'ComparisonError', missing).length > 0);
    await annotate(`Argo CD said: ${saying(status, 'ComparisonError', missing)[0]?.message}`);
    assert.equal((await f.expect.object(tenant, 'ConfigMap', 'shop-settings')).data?.version, '0.2.0');
  });

  it("deploys a chart of an OCI registry (repoURL oci://<registry>/<repository>/<chart>, path '.')", async () => {
    // Given a chart pushed to an OCI registry
    const tenant = await f.given.tenant('chart-oci');
    const repoURL = await registry.pushChart('charts', settingsChart('1.0.0'));

    // When the tenant deploys it at its tag, with inline values
    const gd = await f.when.deployed(tenant, 'settings', {
      repoURL,
      path: '.',
      targetRevision: '1.0.0',
      helm: { releaseName: 'oci', values: 'greeting: from-oci-values\n' },
    });

    // Then it is rendered with them
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    const rendered = await f.expect.object(tenant, 'ConfigMap', 'oci-settings');
    assert.deepEqual(rendered.data, { version: '1.0.0', greeting: 'from-oci-values', color: 'grey' });
  });

  it('deploys two sources: a chart of a Helm repository with a values file of a Git repository named by its ref, and follows the file', async () => {
    // Given a Git repository with the values of an environment, and the chart in the Helm repository
    const tenant = await f.given.tenant('chart-sources');
    const values = await f.given.repository('chart-sources-values', {
      'envs/prod.yaml': ['greeting: from-git-values', 'color: green', ''].join('\n'),
    });

    // When the tenant deploys the chart with the Git repository as a second source, `values`, whose file
    // the chart reads as $values/envs/prod.yaml
    const gd = await f.when.deployed(tenant, 'settings', undefined, {
      sources: [
        {
          repoURL: charts.url,
          chart: 'settings',
          targetRevision: '0.2.0',
          helm: { releaseName: 'multi', valueFiles: ['$values/envs/prod.yaml'] },
        },
        { repoURL: values.fileUrl, ref: 'values' },
      ],
    });

    // Then the chart is rendered with the file's values
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    const rendered = await f.expect.object(tenant, 'ConfigMap', 'multi-settings');
    assert.deepEqual(rendered.data, { version: '0.2.0', greeting: 'from-git-values', color: 'green' });

    // When the file changes in Git
    await values.commit({ 'envs/prod.yaml': ['greeting: from-git-values', 'color: purple', ''].join('\n') });

    // Then the ConfigMap follows
    const changed = await f.expect.object(
      tenant,
      'ConfigMap',
      'multi-settings',
      (cm) => cm.data?.color === 'purple',
    );
    assert.deepEqual(changed.data, { ...rendered.data, color: 'purple' });
  });
});
