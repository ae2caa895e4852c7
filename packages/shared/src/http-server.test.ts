import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { createHealthServer } from './http-server.ts';
import { createMetricsRegistry, getOrCreateCounter } from './metrics.ts';

describe('health server', () => {
  it('answers /healthz with 200 while the process is alive, even before it is ready', async () => {
    const server = createHealthServer({ port: 0, registry: createMetricsRegistry(), isReady: () => false });
    const response = await server.app.inject({ method: 'GET', url: '/healthz' });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json(), { status: 'ok' });
    await server.close();
  });

  it('answers /readyz with 503 until caches are synced, then 200, then 503 while draining', async () => {
    let synced = false;
    const server = createHealthServer({
      port: 0,
      registry: createMetricsRegistry(),
      isReady: () => ({ ready: synced, reason: 'informer caches not synced' }),
    });
    const before = await server.app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(before.statusCode, 503);
    assert.deepEqual(before.json(), { status: 'not ready', reason: 'informer caches not synced' });

    synced = true;
    assert.equal((await server.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);

    server.startDraining();
    const draining = await server.app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(draining.statusCode, 503);
    assert.deepEqual(draining.json(), { status: 'not ready', reason: 'draining' });
    assert.equal((await server.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
    await server.close();
  });

  it('answers /readyz with 503 when the readiness check throws', async () => {
    const server = createHealthServer({
      port: 0,
      registry: createMetricsRegistry(),
      isReady: async () => {
        throw new Error('database unreachable');
      },
    });
    assert.equal((await server.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 503);
    await server.close();
  });

  it('serves the registry in Prometheus text format on /metrics', async () => {
    const registry = createMetricsRegistry();
    getOrCreateCounter(registry, { name: 'test_things_total', help: 'things', labelNames: [] }).inc(3);
    const server = createHealthServer({ port: 0, registry, isReady: () => true });
    const response = await server.app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^text\/plain/);
    assert.match(response.body, /^test_things_total 3$/m);
    assert.match(response.body, /^process_cpu_user_seconds_total /m, 'default process metrics are collected');
    await server.close();
  });
});
