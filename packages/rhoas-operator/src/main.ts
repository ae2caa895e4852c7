/**
 * The RHOAS operator process: configuration, the /healthz /readyz /metrics server on HTTP_PORT, and
 * graceful shutdown on SIGTERM/SIGINT. Everything else is buildRhoasOperator (app.ts).
 */
import {
  ConfigError,
  createHealthServer,
  createLogger,
  createMetricsRegistry,
  installSignalHandlers,
} from '@gitops/shared';
import { buildRhoasOperator } from './app.ts';
import { loadRhoasOperatorConfig, type RhoasOperatorConfig } from './config.ts';

let config: RhoasOperatorConfig;
try {
  config = loadRhoasOperatorConfig();
} catch (err) {
  process.stderr.write(`${err instanceof ConfigError ? err.message : String(err)}\n`);
  process.exit(1);
}

const logger = createLogger({ name: 'rhoas-operator', level: config.logLevel });
const registry = createMetricsRegistry({ defaultLabels: { component: 'rhoas-operator' } });
const operator = buildRhoasOperator(config, { logger, registry });
const server = createHealthServer({
  port: config.httpPort,
  host: config.httpHost,
  registry,
  isReady: () => ({ ready: operator.ready(), reason: 'starting' }),
  logger,
});

let shuttingDown = false;
installSignalHandlers(
  async () => {
    shuttingDown = true;
    server.startDraining();
    await operator.close();
    await server.close();
  },
  { timeoutMs: config.shutdownTimeoutMs, logger },
);

await server.listen();
try {
  await operator.start();
} catch (err) {
  if (!shuttingDown) {
    logger.fatal({ err }, 'the RHOAS operator could not start');
    server.startDraining();
    await operator.close().catch(() => undefined);
    await server.close().catch(() => undefined);
    process.exit(1);
  }
}
