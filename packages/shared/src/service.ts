/**
 * The process around a service (`main.ts` of the backend, the cluster-agent and the RHOAS operator): load
 * the configuration (every error listed, exit 1), build the service, serve /healthz /readyz /metrics on
 * HTTP_PORT, start it, and shut down gracefully on SIGTERM/SIGINT. A start that fails exits 1 after
 * releasing what was opened, bounded by GITOPS_SHUTDOWN_TIMEOUT (Kubernetes restarts the pod). Every process
 * says which build it is (buildInfo): `GET /version`, the `gitops_build_info` metric and its first log line.
 */
import { readFileSync } from 'node:fs';
import type { LogLevel } from './config.ts';
import { createHealthServer } from './http-server.ts';
import { installSignalHandlers } from './lifecycle.ts';
import { createLogger, type Logger } from './logger.ts';
import { createMetricsRegistry, getOrCreateGauge, type Registry } from './metrics.ts';

/** Which build a process runs (docs/upgrades.md). */
export interface BuildInfo {
  /** The root package.json's version (CHANGELOG.md has one entry per version). */
  version: string;
  /** The Git commit the image was built from (`GITOPS_REVISION`, set by the Dockerfile); `unknown` outside one. */
  revision: string;
}

/** The version of this checkout or image, and the commit it was built from. */
export function buildInfo(env: Record<string, string | undefined> = process.env): BuildInfo {
  const root = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
    version?: unknown;
  };
  return {
    version: typeof root.version === 'string' ? root.version : 'unknown',
    revision: env.GITOPS_REVISION || 'unknown',
  };
}

/** What a process runs: built without ports or signals (tests build it in-process). */
export interface Service {
  start(): Promise<void>;
  /** Idempotent; also ends a start() in progress. */
  close(): Promise<void>;
  ready(): boolean;
}

export interface ServiceConfig {
  logLevel: LogLevel;
  httpPort: number;
  httpHost: string;
  shutdownTimeoutMs: number;
}

export async function runService<C extends ServiceConfig>(options: {
  /** `backend`, `cluster-agent`, ...: the logger name and the metrics' `component` label. */
  name: string;
  loadConfig: () => C;
  build: (config: C, deps: { logger: Logger; registry: Registry }) => Service;
}): Promise<void> {
  let config: C;
  try {
    config = options.loadConfig();
  } catch (err) {
    // ConfigError lists every bad variable and never echoes a secret value.
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
  const logger = createLogger({ name: options.name, level: config.logLevel });
  const build = buildInfo();
  logger.info(build, `${options.name} ${build.version} (${build.revision}) starting`);
  const registry = createMetricsRegistry({ defaultLabels: { component: options.name } });
  // Prometheus' build_info convention: always 1, the build in its labels.
  getOrCreateGauge(registry, {
    name: 'gitops_build_info',
    help: 'Always 1; the version and the Git revision of the running build in its labels',
    labelNames: ['version', 'revision'],
  }).set(build, 1);
  let service: Service;
  try {
    service = options.build(config, { logger, registry });
  } catch (err) {
    logger.fatal({ err }, `the ${options.name} cannot be built (kubeconfig?)`);
    process.exit(1);
  }
  const server = createHealthServer({
    port: config.httpPort,
    host: config.httpHost,
    registry,
    isReady: () => ({ ready: service.ready(), reason: 'starting' }),
    logger,
  });
  server.app.get('/version', async () => ({ component: options.name, ...build }));

  let shuttingDown = false;
  installSignalHandlers(
    async () => {
      shuttingDown = true;
      server.startDraining();
      await service.close();
      await server.close();
    },
    { timeoutMs: config.shutdownTimeoutMs, logger },
  );

  try {
    await server.listen();
    await service.start();
  } catch (err) {
    // A signal during start closes the service, which ends start(): then the signal handler exits, not us.
    if (shuttingDown) return;
    logger.fatal({ err }, `the ${options.name} could not start`);
    const cleanup = (async () => {
      server.startDraining();
      await service.close().catch(() => undefined);
      await server.close().catch(() => undefined);
    })();
    await Promise.race([
      cleanup,
      new Promise((resolve) => setTimeout(resolve, config.shutdownTimeoutMs).unref()),
    ]);
    process.exit(1);
  }
}
