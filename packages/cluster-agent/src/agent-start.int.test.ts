/**
 * An agent that starts while the API server or PostgreSQL is away for a moment, as when one restarts while an
 * agent starts (the chaos tier restarts both, and kills agents): what may pass is waited for (the manager retries
 * it, logging what it waits for), never taken for a permanent refusal that ends the process.
 *
 * - The registration (registration.ts) with the API server gone: it never takes the API server's URL for the
 *   identity of another cluster and refuses itself.
 * - The recovery before start (the operation sweep, after the caches synced) with PostgreSQL gone.
 */
import assert from 'node:assert/strict';
import { createDb, getEngineInstanceByName } from '@gitops/db';
import { startTcpProxy, type TcpProxy } from '@gitops/local-env';
import {
  createLogger,
  createMetricsRegistry,
  createSilentLogger,
  getObject,
  isTerminalError,
  isTransientError,
  KubeConfig,
} from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterEach, describe, it } from 'vitest';
import { buildAgent } from './app.ts';
import { createAgentRegistration } from './registration.ts';
import { useAgentFixture } from './testing/agent-fixture.ts';

describe('an agent starting while the API server or PostgreSQL is away', () => {
  const f = useAgentFixture({ prefix: 'agent-start' });
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close();
  });

  /** A proxy on a loopback port in front of the test run's API server, and a kubeconfig that goes through it. */
  async function apiServerThroughProxy(port?: number): Promise<{ proxy: TcpProxy; kc: KubeConfig }> {
    const cluster = f.kc.getCurrentCluster();
    const user = f.kc.getCurrentUser();
    assert.ok(cluster && user);
    const server = new URL(cluster.server);
    const proxy = await startTcpProxy({
      target: { host: server.hostname, port: Number(server.port) },
      ...(port === undefined ? {} : { port }),
    });
    closing.push(() => proxy.stop());
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ ...cluster, name: 'proxied', server: `https://127.0.0.1:${proxy.port}` }],
      users: [user],
      contexts: [{ name: 'proxied', cluster: 'proxied', user: user.name }],
      currentContext: 'proxied',
    });
    return { proxy, kc };
  }

  /** The registration of this fixture's instance, with its own role, reaching the API server through `kc`. */
  async function registration(kc: KubeConfig) {
    const config = await f.withOwnRole(f.config());
    const db = createDb(config.databaseUrl, { max: 2 });
    closing.push(() => db.destroy());
    return createAgentRegistration({
      config,
      kc,
      db,
      logger: createSilentLogger(),
      registry: createMetricsRegistry({ defaultMetrics: false }),
    });
  }

  it('an API server gone between the namespace read and the registration is waited for, not taken for another cluster', async () => {
    const kubeSystem = await getObject(f.kc, { apiVersion: 'v1', kind: 'Namespace', name: 'kube-system' });
    const thisCluster = kubeSystem?.metadata.uid;
    assert.ok(thisCluster);
    // The instance's first agent registered it on this cluster.
    const first = await registration(f.kc);
    const signal = new AbortController().signal;
    for (const step of first.steps) await step.run(signal);
    assert.equal(first.engineInstance()?.cluster_identity, thisCluster);

    // A restarted agent: the namespace read, the settings and the schema while the API server answers...
    const { proxy, kc } = await apiServerThroughProxy();
    const restarted = await registration(kc);
    const [register, ...before] = [...restarted.steps].reverse();
    assert.ok(register);
    for (const step of before.reverse()) await step.run(signal);
    // ... then the API server goes away (nothing listens on its address) just before the registration.
    await proxy.stop();
    const failed = await register.run(signal).then(
      () => undefined,
      (err: unknown) => err,
    );
    assert.ok(failed instanceof Error, 'the registration did not fail without an API server');
    // A failure the manager retries (retryAtStart), not a refusal that ends the process.
    assert.ok(!isTerminalError(failed), `a terminal error: ${failed.message}`);
    assert.ok(isTransientError(failed), `not a transient error: ${failed.message}`);
    assert.doesNotMatch(failed.message, /runs on cluster/);
    assert.equal((await getEngineInstanceByName(f.db, f.engineInstanceName))?.cluster_identity, thisCluster);

    // The API server is back on the same address: the same step registers the instance, on this cluster.
    await apiServerThroughProxy(proxy.port);
    await register.run(signal);
    assert.equal(restarted.engineInstance()?.cluster_identity, thisCluster);
    assert.equal(restarted.ownRole(), true);
  });

  it('waits for PostgreSQL gone just before its recovery before start, then starts', async () => {
    const own = await f.withOwnRole(f.config());
    const database = new URL(own.databaseUrl);
    const target = { host: database.hostname, port: Number(database.port) };
    let proxy = await startTcpProxy({ target });
    closing.push(() => proxy.stop());
    const throughProxy = new URL(own.databaseUrl);
    throughProxy.hostname = '127.0.0.1';
    throughProxy.port = String(proxy.port);
    const lines: string[] = [];
    let gone: Promise<void> | undefined;
    let back: Promise<TcpProxy> | undefined;
    // Played at the agent's own log lines, so at the same point of its start every run: PostgreSQL goes away
    // once the last start step (the active lock) is done, before the caches synced and the sweep reads it ...
    const logger = createLogger({
      name: 'cluster-agent',
      level: 'info',
      destination: {
        write(line: string) {
          lines.push(line);
          if (!gone && line.includes('"active agent of this engine instance"')) gone = proxy.stop();
          // ... and comes back on the same address once the agent said it waits for it.
          if (gone && !back && line.includes('the recovery before start failed; retrying')) {
            back = gone.then(() => startTcpProxy({ target, port: proxy.port }));
          }
        },
      },
    });
    const agent = buildAgent(
      { ...own, databaseUrl: throughProxy.toString() },
      { logger, registry: createMetricsRegistry({ defaultMetrics: false }) },
    );
    closing.push(() => agent.close());
    await agent.start().catch((err: unknown) => {
      throw new Error(`the agent did not start: ${String(err)}\n${lines.slice(-10).join('')}`);
    });
    assert.ok(gone, 'PostgreSQL was not taken away');
    assert.ok(back, 'the agent did not say it waits for PostgreSQL');
    proxy = await back;
    assert.equal(agent.ready(), true);
    // Its active-lock session went with PostgreSQL: it takes the lock again.
    await eventually('the active lock taken again', async () => agent.isActive() || undefined);
  });
});
