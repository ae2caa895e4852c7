/**
 * The probe and metrics server of each process (controller-runtime's healthz + metrics endpoints):
 * - `GET /healthz`: 200 while the process is alive (liveness: restart only if the event loop is stuck);
 * - `GET /readyz`: 200 once `isReady()` says so (e.g. informer caches synced), 503 before that and
 *   503 from the moment draining starts, so Services stop routing before shutdown;
 * - `GET /metrics`: the Prometheus registry.
 * Tests call `server.app.inject()`; no port is opened until `listen()`.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from './logger.ts';
import type { Registry } from './metrics.ts';

/** What readiness checks answer: a boolean, or a boolean with the reason it is not ready. */
export type ReadinessCheck = () =>
  | boolean
  | { ready: boolean; reason?: string }
  | Promise<boolean | { ready: boolean; reason?: string }>;

export interface CreateHealthServerOptions {
  /** Port for `listen()`; 0 picks a free port. */
  port: number;
  host?: string;
  registry: Registry;
  /** Readiness apart from draining, e.g. `() => informers.every((i) => i.hasSynced())`. */
  isReady: ReadinessCheck;
  logger?: Logger;
}

export interface HealthServer {
  readonly app: FastifyInstance;
  /** Starts listening; resolves to the address, e.g. `http://127.0.0.1:8080`. */
  listen(): Promise<string>;
  /** From now on `/readyz` answers 503 (first step of graceful shutdown). */
  startDraining(): void;
  isDraining(): boolean;
  close(): Promise<void>;
}

export function createHealthServer(options: CreateHealthServerOptions): HealthServer {
  const app = Fastify({ logger: false });
  let draining = false;

  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    if (draining) return reply.code(503).send({ status: 'not ready', reason: 'draining' });
    let answer: boolean | { ready: boolean; reason?: string };
    try {
      answer = await options.isReady();
    } catch (err) {
      options.logger?.warn({ err }, 'readiness check failed');
      return reply.code(503).send({ status: 'not ready', reason: 'readiness check failed' });
    }
    const { ready, reason } = typeof answer === 'boolean' ? { ready: answer, reason: undefined } : answer;
    if (!ready) return reply.code(503).send({ status: 'not ready', reason: reason ?? 'not ready' });
    return { status: 'ok' };
  });

  app.get('/metrics', async (_request, reply) => {
    const body = await options.registry.metrics();
    return reply.header('content-type', options.registry.contentType).send(body);
  });

  return {
    app,
    async listen() {
      const address = await app.listen({ port: options.port, host: options.host ?? '0.0.0.0' });
      options.logger?.info({ address }, 'health and metrics server listening');
      return address;
    },
    startDraining() {
      draining = true;
    },
    isDraining: () => draining,
    close: () => app.close(),
  };
}
