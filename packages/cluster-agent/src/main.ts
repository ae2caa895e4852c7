/**
 * The cluster-agent process: configuration, the /healthz /readyz /metrics server on HTTP_PORT, and graceful
 * shutdown on SIGTERM/SIGINT (runService). Everything else is buildAgent (app.ts).
 */
import { runService } from '@gitops/shared';
import { buildAgent } from './app.ts';
import { loadAgentConfig } from './config.ts';

await runService({
  name: 'cluster-agent',
  loadConfig: loadAgentConfig,
  // An agent that lost the active lock has stopped: exit, to come back as the standby.
  build: (config, deps) => buildAgent(config, { ...deps, onActiveLost: () => process.exit(1) }),
});
