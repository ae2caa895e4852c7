/**
 * Tier 3b: a Helm chart in Git deployed through `spec.source.helm` with a real Argo CD, whose repo-server
 * renders it with the `helm` binary tools/argocd/build.sh builds (the version Argo CD's image ships). The
 * user's values, value files and parameters reach the rendered objects and a change to them reaches the
 * cluster; Argo CD's errors reach the GitOpsDeployment as conditions; a chart cannot put an object outside the
 * tenant's namespaces (issue 35; docs/api.md, GitOpsDeployment).
 */

import assert from 'node:assert/strict';
import type { GitOpsDeploymentSpec } from '@gitops/api';
import type { Files, GitRepo } from '@gitops/local-env';
import { describe, it } from 'vitest';
import { configMapChart } from '../fixture/charts.ts';
import {
  type DeploymentStatus,
  gitSource,
  syncedAndHealthy,
  useRealSystem,
} from '../fixture/real-argo-cd.ts';

type HelmSource = NonNullable<NonNullable<GitOpsDeploymentSpec['source']>['helm']>;

/**
 * A chart whose one ConfigMap shows every value and the release name; `target`, when set, is the namespace
 * the chart puts it into (else Helm's, the destination's).
 */
const chart = (path: string): Files =>
  configMapChart(
    {
      name: 'settings',
      version: '0.1.0',
      values: {
        greeting: 'from-chart-defaults',
        color: 'grey',
        size: 'small',
        untouched: 'chart-default',
        target: '',
      },
      configMap: '{{ .Release.Name }}-settings',
      metadata: ['  {{- with .Values.target }}', '  namespace: {{ . }}', '  {{- end }}'],
      data: {
        release: '{{ .Release.Name | quote }}',
        greeting: '{{ .Values.greeting | quote }}',
        color: '{{ .Values.color | quote }}',
        size: '{{ .Values.size | quote }}',
        untouched: '{{ .Values.untouched | quote }}',
      },
      files: { 'values-large.yaml': ['size: large', ''].join('\n') },
    },
    path,
  );

/** The True conditions of `type` whose message matches `pattern`. */
const saying = (status: DeploymentStatus, type: string, pattern: RegExp) =>
  (status.conditions ?? []).filter(
    (c) => c.type === type && c.status === 'True' && pattern.test(c.message ?? ''),
  );

describe('tier 3b: Helm charts with a real Argo CD', () => {
  const f = useRealSystem();
  /** Given a tenant `<name>` and the chart in a repository `<name>-app`. */
  const givenChart = async (name: string) => ({
    tenant: await f.given.tenant(name),
    repo: await f.given.repository(`${name}-app`, chart('chart')),
  });
  /** The chart (in `repo`) deployed with these Helm settings. */
  const chartSource = (repo: GitRepo, helm: HelmSource) => ({ ...gitSource(repo, 'chart'), helm });

  it("renders a chart with the user's inline values, value file and parameters; a changed parameter reaches the ConfigMap", async () => {
    // Given a Helm chart in Git
    const { tenant, repo } = await givenChart('helm-values');

    // When the tenant deploys it with a release name, inline values, a value file of the chart's repository
    // and a parameter
    const gd = await f.when.deployed(
      tenant,
      'settings',
      chartSource(repo, {
        releaseName: 'shop',
        values: 'greeting: hello-from-values\n',
        valueFiles: ['values-large.yaml'],
        parameters: [{ name: 'color', value: 'blue' }],
      }),
    );

    // Then the rendered ConfigMap carries each of them, and the chart's default where none overrides it
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    const rendered = await f.expect.object(tenant, 'ConfigMap', 'shop-settings');
    assert.deepEqual(rendered.data, {
      release: 'shop',
      greeting: 'hello-from-values',
      color: 'blue',
      size: 'large',
      untouched: 'chart-default',
    });

    // When the user changes the parameter in the GitOpsDeployment (nothing changes in Git)
    await f.when.edited(gd, { source: { helm: { parameters: [{ name: 'color', value: 'green' }] } } });

    // Then the ConfigMap follows, the rest as it was
    const changed = await f.expect.object(
      tenant,
      'ConfigMap',
      'shop-settings',
      (cm) => cm.data?.color === 'green',
    );
    assert.deepEqual(changed.data, { ...rendered.data, color: 'green' });
    await f.expect.deployment(gd).is('Synced/Healthy again', syncedAndHealthy);
  });

  it('valuesObject and a forced string parameter; the release name defaults to the Application’s', async () => {
    const { tenant, repo } = await givenChart('helm-object');

    const gd = await f.when.deployed(
      tenant,
      'settings',
      chartSource(repo, {
        valuesObject: { greeting: 'hello-from-object', size: 'medium' },
        parameters: [{ name: 'color', value: '1234', forceString: true }],
      }),
    );

    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    const release = `gitopsdepl-${gd.metadata.uid}`;
    const rendered = await f.expect.object(tenant, 'ConfigMap', `${release}-settings`);
    assert.deepEqual(rendered.data, {
      release,
      greeting: 'hello-from-object',
      color: '1234',
      size: 'medium',
      untouched: 'chart-default',
    });
  });

  it("a value file the repository does not have: the GitOpsDeployment carries Argo CD's ComparisonError until the user drops it", async ({
    annotate,
  }) => {
    // Given a chart in Git
    const { tenant, repo } = await givenChart('helm-missing');

    // When the tenant names a value file that is not in the repository
    const gd = await f.when.deployed(
      tenant,
      'settings',
      chartSource(repo, { releaseName: 'missing', valueFiles: ['values-nowhere.yaml'] }),
    );

    // Then Argo CD's error, naming the file, is a condition of the GitOpsDeployment, and nothing is deployed
    const missing = /values-nowhere\.yaml/;
    const status = await f.expect
      .deployment(gd)
      .is("Argo CD's ComparisonError", (s) => saying(s, 'ComparisonError', missing).length > 0);
    const condition = saying(status, 'ComparisonError', missing)[0];
    await annotate(`Argo CD said: ${condition?.message}`);
    assert.equal(condition?.reason, 'ComparisonError');
    assert.notEqual(status.sync?.status, 'Synced');
    assert.equal(await f.expect.readObject(tenant, 'ConfigMap', 'missing-settings'), undefined);

    // When the user drops the value file
    await f.when.edited(gd, { source: { helm: { valueFiles: null } } });

    // Then the chart is deployed and the condition is no longer True
    const fixed = await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    assert.deepEqual(saying(fixed, 'ComparisonError', /./), []);
    assert.equal((await f.expect.object(tenant, 'ConfigMap', 'missing-settings')).data?.size, 'small');
  });

  it("a chart that puts its ConfigMap into another tenant's namespace: refused by the tenant's project, nothing created there, and the GitOpsDeployment says why", async ({
    annotate,
  }) => {
    // Given two tenants, and a chart whose ConfigMap goes wherever its value `target` says
    const { tenant, repo } = await givenChart('helm-intruder');
    const victim = await f.given.tenant('helm-victim');
    const intoVictim = (releaseName: string) =>
      chartSource(repo, { releaseName, parameters: [{ name: 'target', value: victim }] });
    const refusal = new RegExp(`namespace ${victim} is not permitted in project`);

    // When the first tenant deploys it with `target` set to the other tenant's namespace (Argo CD retries a
    // failed sync without end by default)
    const retried = await f.when.deployed(tenant, 'retried', intoVictim('retried'));

    // Then Argo CD refuses the namespace (the tenant's AppProject does not list it), and the sync Argo CD
    // keeps retrying says so on the GitOpsDeployment, the ConfigMap's own result too
    type SyncResult = { resources?: { name?: string; status?: string; message?: string }[] };
    const operation = (s: DeploymentStatus) =>
      s.operationState as { message?: string; syncResult?: SyncResult } | undefined;
    const status = await f.expect
      .deployment(retried)
      .is('the sync refused', (s) => refusal.test(operation(s)?.message ?? ''));
    await annotate(`Argo CD's sync said: ${operation(status)?.message}`);
    const result = operation(status)?.syncResult?.resources?.find((r) => r.name === 'retried-settings');
    assert.equal(result?.status, 'SyncFailed');
    assert.match(result?.message ?? '', refusal);
    assert.notEqual(status.sync?.status, 'Synced');

    // When it deploys the same with a retry limit
    const given = await f.when.deployed(tenant, 'given-up', intoVictim('given-up'), {
      syncPolicy: { retry: { limit: 1, backoff: { duration: '1s' } } },
    });

    // Then once Argo CD gives up, its SyncError with the reason is a condition of the GitOpsDeployment
    const gaveUp = await f.expect
      .deployment(given)
      .is("Argo CD's SyncError", (s) => saying(s, 'SyncError', refusal).length > 0);
    await annotate(`Argo CD's condition said: ${saying(gaveUp, 'SyncError', refusal)[0]?.message}`);
    assert.equal(saying(gaveUp, 'SyncError', refusal)[0]?.reason, 'SyncError');
    assert.notEqual(gaveUp.sync?.status, 'Synced');

    // and nothing was created in the other tenant's namespace, nor in the tenant's own
    for (const name of ['retried-settings', 'given-up-settings']) {
      assert.equal(await f.expect.readObject(victim, 'ConfigMap', name), undefined);
      assert.equal(await f.expect.readObject(tenant, 'ConfigMap', name), undefined);
    }
  });
});
