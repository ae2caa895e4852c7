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
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { configMapChart } from '../fixture/charts.ts';
import { get } from '../fixture/kube.ts';
import {
  type DeploymentStatus,
  type RealSystem,
  startRealSystem,
  syncedAndHealthy,
} from '../fixture/real-argo-cd.ts';

/** A chart `settings` at `version`, whose one ConfigMap shows its version and two values. */
const settingsChart = (version: string): Files =>
  configMapChart({
    name: 'settings',
    version,
    values: { greeting: 'from-chart-defaults', color: 'grey' },
    configMap: '{{ .Release.Name }}-settings',
    data: {
      version: '{{ .Chart.Version | quote }}',
      greeting: '{{ .Values.greeting | quote }}',
      color: '{{ .Values.color | quote }}',
    },
  });

const PASSWORD = 'tier3b-Ch4rts-Pa55word';

/** The True conditions of `type` whose message matches `pattern`. */
const saying = (status: DeploymentStatus, type: string, pattern: RegExp) =>
  (status.conditions ?? []).filter(
    (c) => c.type === type && c.status === 'True' && pattern.test(c.message ?? ''),
  );

describe('tier 3b: charts of Helm repositories and OCI registries, and several sources, with a real Argo CD', () => {
  let f: RealSystem;
  let charts: HelmRepository;
  /** A Helm repository behind basic auth (jane / PASSWORD). */
  let privateCharts: HelmRepository;
  let registry: OciRegistry;
  /** An OCI registry that wants a bearer token its token service gives for jane / PASSWORD. */
  let privateRegistry: OciRegistry;

  beforeAll(async () => {
    const helm = join(dirname(await ensureArgoCdBinary()), 'helm');
    charts = await startHelmRepository({ helm });
    await charts.publish(settingsChart('0.1.0'));
    await charts.publish(settingsChart('0.2.0'));
    privateCharts = await startHelmRepository({ helm, auth: { username: 'jane', password: PASSWORD } });
    await privateCharts.publish(settingsChart('3.0.0'));
    registry = await startOciRegistry({ helm });
    privateRegistry = await startOciRegistry({ helm, auth: { username: 'jane', password: PASSWORD } });
    // Argo CD's repo-server trusts the registries' certificates for their host, as it would a Git server's;
    // the backend checks the private one with its certificate (GIT_SSL_CAINFO).
    f = await startRealSystem({
      trustedCertificates: { '127.0.0.1': registry.certificate + privateRegistry.certificate },
      caFile: privateRegistry.caFile,
    });
  });
  afterAll(async () => {
    await f?.stop();
    await registry?.stop();
    await privateRegistry?.stop();
    await charts?.stop();
    await privateCharts?.stop();
  });

  /** Waits until the backend has checked the RepositoryCredential at `path`, and asserts it found it valid. */
  async function expectCredentialValid(path: string): Promise<void> {
    type Conditions = { status?: { conditions?: { type: string; status: string }[] } };
    const conditions = await eventually(
      'the RepositoryCredential checked',
      async () => {
        const c = (await get<Conditions>(f.system.kc, path))?.status?.conditions ?? [];
        return c.some((x) => x.type === 'ValidRepositoryCredential') ? c : undefined;
      },
      60_000,
    );
    assert.deepEqual(
      conditions.map((c) => [c.type, c.status]),
      [
        ['ErrorOccurred', 'False'],
        ['ValidRepositoryURL', 'True'],
        ['ValidRepositoryCredential', 'True'],
      ],
    );
  }

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

    // Then the chart is rendered with the file's values, and the status names each source's revision: the
    // chart's version and the Git commit
    const deployed = await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    assert.deepEqual(deployed.sync?.revisions, ['0.2.0', await values.head()]);
    assert.deepEqual(
      deployed.reconciledState?.sources?.map((s) => [s.repoURL, s.chart, s.branch]),
      [
        [charts.url, 'settings', '0.2.0'],
        [values.fileUrl, undefined, ''],
      ],
    );
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

  it("a private Helm repository: deployed with the tenant's RepositoryCredential of type helm, which says it is valid; a tenant without one is refused by its project, even once Argo CD has the chart", async ({
    annotate,
  }) => {
    // Given a Helm repository behind basic auth, and a tenant that deploys one of its charts without credentials
    const intruder = await f.given.tenant('chart-intruder');
    const stolen = await f.when.deployed(intruder, 'stolen', {
      repoURL: privateCharts.url,
      chart: 'settings',
      targetRevision: '3.0.0',
      helm: { releaseName: 'stolen' },
    });
    // Then Argo CD cannot read the repository: its error is a condition of the GitOpsDeployment
    const refused = await f.expect
      .deployment(stolen)
      .is('a ComparisonError', (s) => saying(s, 'ComparisonError', /./).length > 0);
    await annotate(`Argo CD said: ${saying(refused, 'ComparisonError', /./)[0]?.message}`);

    // When another tenant creates a RepositoryCredential of type helm for the repository
    const owner = await f.given.tenant('chart-owner');
    const credentialPath = await f.given.repositoryCredential(
      owner,
      'charts',
      { repository: privateCharts.url, type: 'helm' },
      { name: 'chart-creds', credentials: { username: 'jane', password: PASSWORD } },
    );

    // Then the backend's check of the repository and credentials says they are valid
    await expectCredentialValid(credentialPath);

    // When that tenant deploys the chart
    const gd = await f.when.deployed(owner, 'settings', {
      repoURL: privateCharts.url,
      chart: 'settings',
      targetRevision: '3.0.0',
      helm: { releaseName: 'private' },
    });

    // Then Argo CD reads it with the credential and deploys it
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    assert.equal((await f.expect.object(owner, 'ConfigMap', 'private-settings')).data?.version, '3.0.0');

    // and the first tenant, whose project no longer lists the now private repository, is refused by Argo CD
    // although its repo-server has the chart in its cache: nothing is deployed for it
    const notPermitted = /not permitted in project/;
    const withheld = await f.expect
      .deployment(stolen)
      .is('refused by its project', (s) =>
        (s.conditions ?? []).some((c) => c.status === 'True' && notPermitted.test(c.message ?? '')),
      );
    await annotate(
      `Argo CD said: ${withheld.conditions?.find((c) => notPermitted.test(c.message ?? ''))?.message}`,
    );
    assert.notEqual(withheld.sync?.status, 'Synced');
    assert.equal(await f.expect.readObject(intruder, 'ConfigMap', 'stolen-settings'), undefined);
    // When it edits its deployment (a new operation, a new look at its project), it is refused all the same
    await f.when.edited(stolen, { source: { helm: { releaseName: 'stolen-again' } } });
    await f.expect
      .deployment(stolen)
      .is('still refused', (s) =>
        (s.conditions ?? []).some((c) => c.status === 'True' && notPermitted.test(c.message ?? '')),
      );
    assert.equal(await f.expect.readObject(intruder, 'ConfigMap', 'stolen-again-settings'), undefined);
    // and the password appears in no log line of any process
    assert.equal(f.logs.filter((l) => l.includes(PASSWORD)).length, 0);
  });

  it("a private OCI registry: deployed with the tenant's RepositoryCredential of type oci, checked through the registry's token service; a tenant without one is refused by its project", async () => {
    // Given a chart in an OCI registry that wants a token, and a tenant with a RepositoryCredential of type oci
    const repoURL = await privateRegistry.pushChart('charts', settingsChart('2.0.0'));
    const owner = await f.given.tenant('oci-owner');
    const credentialPath = await f.given.repositoryCredential(
      owner,
      'registry',
      { repository: repoURL, type: 'oci' },
      { name: 'registry-creds', credentials: { username: 'jane', password: PASSWORD } },
    );

    // Then the backend's check (a token for the credentials, then the registry) says they are valid
    await expectCredentialValid(credentialPath);

    // When the tenant deploys the chart
    const gd = await f.when.deployed(owner, 'settings', {
      repoURL,
      path: '.',
      targetRevision: '2.0.0',
      helm: { releaseName: 'registry' },
    });

    // Then Argo CD pulls it with the credential and deploys it
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    assert.equal((await f.expect.object(owner, 'ConfigMap', 'registry-settings')).data?.version, '2.0.0');

    // When another tenant deploys the same chart without a credential of its own
    const intruder = await f.given.tenant('oci-intruder');
    const stolen = await f.when.deployed(intruder, 'stolen', {
      repoURL,
      path: '.',
      targetRevision: '2.0.0',
      helm: { releaseName: 'stolen' },
    });

    // Then its project does not list the registry: Argo CD refuses it, and nothing is deployed
    const notPermitted = /not permitted in project/;
    const refused = await f.expect
      .deployment(stolen)
      .is('refused by its project', (s) =>
        (s.conditions ?? []).some((c) => c.status === 'True' && notPermitted.test(c.message ?? '')),
      );
    assert.notEqual(refused.sync?.status, 'Synced');
    assert.equal(await f.expect.readObject(intruder, 'ConfigMap', 'stolen-settings'), undefined);
    assert.equal(f.logs.filter((l) => l.includes(PASSWORD)).length, 0);
  });
});
