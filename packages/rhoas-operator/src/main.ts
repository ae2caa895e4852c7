/**
 * The RHOAS operator process: configuration, the /healthz /readyz /metrics server on HTTP_PORT, and
 * graceful shutdown on SIGTERM/SIGINT (runService). Everything else is buildRhoasOperator (app.ts).
 */
import { runService } from '@gitops/shared';
import { buildRhoasOperator } from './app.ts';
import { loadRhoasOperatorConfig } from './config.ts';

await runService({ name: 'rhoas-operator', loadConfig: loadRhoasOperatorConfig, build: buildRhoasOperator });
