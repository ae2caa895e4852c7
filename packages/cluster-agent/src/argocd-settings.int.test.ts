import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import {
  createLogger,
  createMetricsRegistry,
  deleteIfExists,
  HttpMethod,
  kubeRequest,
  loadKubeConfig,
} from '@gitops/shared';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { ARGOCD_CMD_PARAMS_CONFIGMAP, checkResourceHealthPersisted } from './argocd-settings.ts';

const kc = loadKubeConfig(process.env.KUBECONFIG);
const namespace = `argocd-settings-${randomBytes(4).toString('hex')}`;

function capturingLogger() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { lines, logger: createLogger({ name: 'cluster-agent', level: 'info', destination }) };
}

async function gaugeValue(registry: ReturnType<typeof createMetricsRegistry>): Promise<number | undefined> {
  const metric = await registry.getSingleMetric('gitops_argocd_resource_health_persisted')?.get();
  return metric?.values[0]?.value;
}

describe('the agent checks at start that Argo CD persists resource health', () => {
  beforeAll(async () => {
    await kubeRequest(kc, {
      method: HttpMethod.POST,
      path: '/api/v1/namespaces',
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } },
    });
  });
  afterAll(async () => {
    await deleteIfExists(kc, { apiVersion: 'v1', kind: 'Namespace', name: namespace });
  });

  it('without argocd-cmd-params-cm it says what to set, and the gauge is 0', async () => {
    const { lines, logger } = capturingLogger();
    const registry = createMetricsRegistry();
    assert.equal(await checkResourceHealthPersisted(kc, namespace, { logger, registry }), 'not-persisted');
    assert.equal(await gaugeValue(registry), 0);
    const warning = lines.map((l) => JSON.parse(l)).find((l) => l.level === 'warn' || l.level === 40);
    assert.match(
      String(warning?.msg),
      /set controller\.resource\.health\.persist: "true" in argocd-cmd-params-cm .*status\.resources/,
    );
  });

  it('with controller.resource.health.persist "true" it is quiet, and the gauge is 1', async () => {
    await kubeRequest(kc, {
      method: HttpMethod.POST,
      path: `/api/v1/namespaces/${namespace}/configmaps`,
      body: {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: ARGOCD_CMD_PARAMS_CONFIGMAP },
        data: { 'controller.resource.health.persist': 'true' },
      },
    });
    const { lines, logger } = capturingLogger();
    const registry = createMetricsRegistry();
    assert.equal(await checkResourceHealthPersisted(kc, namespace, { logger, registry }), 'persisted');
    assert.equal(await gaugeValue(registry), 1);
    assert.deepEqual(lines, []);
  });
});
