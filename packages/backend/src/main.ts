/**
 * The backend process: configuration, the /healthz /readyz /metrics server on HTTP_PORT, and graceful
 * shutdown on SIGTERM/SIGINT (runService). Everything else is buildBackend (app.ts).
 */
import { runService } from '@gitops/shared';
import { buildBackend } from './app.ts';
import { loadBackendConfig } from './config.ts';

await runService({ name: 'backend', loadConfig: loadBackendConfig, build: buildBackend });
