/**
 * The backend process: configuration, the /healthz /readyz /metrics server on HTTP_PORT, and graceful
 * shutdown on SIGTERM/SIGINT. Everything else is buildBackend (app.ts).
 */
import {
  ConfigError,
  createHealthServer,
  createLogger,
  createMetricsRegistry,
  installSignalHandlers,
} from '@gitops/shared';
import { buildBackend } from './app.ts';
import { loadBackendConfig } from './config.ts';

let config: ReturnType<typeof loadBackendConfig>;
try {
  config = loadBackendConfig();
} catch (err) {
  process.stderr.write(`${err instanceof ConfigError ? err.message : String(err)}\n`);
  process.exit(1);
}

const logger = createLogger({ name: 'backend', level: config.logLevel });
const registry = createMetricsRegistry({ defaultLabels: { component: 'backend' } });
const backend = buildBackend(config, { logger, registry });
const server = createHealthServer({
  port: config.httpPort,
  host: config.httpHost,
  registry,
  isReady: () => ({ ready: backend.ready(), reason: 'starting' }),
  logger,
});

let shuttingDown = false;
installSignalHandlers(
  async () => {
    shuttingDown = true;
    server.startDraining();
    await backend.close();
    await server.close();
  },
  { timeoutMs: config.shutdownTimeoutMs, logger },
);

await server.listen();
try {
  await backend.start();
} catch (err) {
  // A signal during start stops the informer and the listener: then the signal handler exits, not us.
  if (!shuttingDown) await exitAfterFailedStart(err);
}

async function exitAfterFailedStart(err: unknown): Promise<never> {
  logger.fatal({ err }, 'the backend could not start');
  // Kubernetes restarts the pod; exit non-zero after releasing what was opened (bounded in time).
  const cleanup = (async () => {
    server.startDraining();
    await backend.close().catch(() => undefined);
    await server.close().catch(() => undefined);
  })();
  await Promise.race([
    cleanup,
    new Promise((resolve) => setTimeout(resolve, config.shutdownTimeoutMs).unref()),
  ]);
  process.exit(1);
}
