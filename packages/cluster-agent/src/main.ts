/**
 * The cluster-agent process: configuration, the agent, the /healthz /readyz /metrics server, and graceful
 * shutdown on SIGTERM/SIGINT. Everything else is in app.ts.
 */
import {
  createHealthServer,
  createLogger,
  createMetricsRegistry,
  installSignalHandlers,
  onShutdown,
} from '@gitops/shared';
import { type Agent, buildAgent } from './app.ts';
import { type AgentConfig, loadAgentConfig } from './config.ts';

let config: AgentConfig;
try {
  config = loadAgentConfig();
} catch (err) {
  // ConfigError lists every bad variable and never echoes a secret value.
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}

const logger = createLogger({ name: 'cluster-agent', level: config.logLevel });
const registry = createMetricsRegistry({ defaultLabels: { component: 'cluster-agent' } });
let agent: Agent;
try {
  agent = buildAgent(config, { logger, registry });
} catch (err) {
  logger.fatal({ err }, 'cluster-agent cannot be built (kubeconfig?)');
  process.exit(1);
}
const health = createHealthServer({
  port: config.httpPort,
  host: config.httpHost,
  registry,
  logger,
  isReady: () => (agent.ready() ? true : { ready: false, reason: 'informers not synced' }),
});

onShutdown(() => agent.close(), 'agent');
let stopping = false;
installSignalHandlers(
  async () => {
    stopping = true;
    health.startDraining();
    await agent.close();
    await health.close();
  },
  { timeoutMs: config.shutdownTimeoutMs, logger },
);

try {
  await health.listen();
  await agent.start();
} catch (err) {
  // A signal during start closes the agent, which ends start(): that is a graceful shutdown, not a failure.
  if (!stopping) {
    logger.fatal({ err }, 'cluster-agent failed to start');
    await agent.close().catch(() => undefined);
    await health.close().catch(() => undefined);
    process.exit(1);
  }
}
