/**
 * The CLI's configuration, taken the way the services take it (docs/admin-cli.md#configuration):
 * `DATABASE_URL` (and `GITOPS_DATABASE_PREPARED_STATEMENTS`), `KUBECONFIG` (or `--kubeconfig`; else ~/.kube/config
 * or the in-cluster service account; its current context, or `--context`'s) and `GITOPS_ENCRYPTION_KEYS`, parsed by the same definitions as the backend's (@gitops/shared's
 * databaseUrlVar, @gitops/db's encryptionKeysVar) and opened with the same functions (createDb,
 * loadKubeConfig, createSealer). Each is loaded only when a command needs it; what is missing or unreachable
 * is a `CliError` with exit code 2 and one line naming it.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import {
  createDb,
  createSealer,
  type Db,
  type EncryptionKeys,
  encryptionKeysVar,
  type Sealer,
} from '@gitops/db';
import {
  ConfigError,
  databasePreparedStatementsVar,
  databaseUrlVar,
  HttpMethod,
  KubeApiError,
  type KubeConfig,
  kubeRequest,
  loadConfig,
  loadKubeConfig,
} from '@gitops/shared';

/** Exit codes (docs/admin-cli.md#exit-codes). */
export const ExitCode = {
  ok: 0,
  /** The command ran and found a problem (a doctor check failed, an operation could not be retried...). */
  failed: 1,
  /** The command could not run: bad arguments, missing configuration, database or API server unreachable. */
  cannotRun: 2,
} as const;

/** An expected error: printed as one line (no stack trace), exits with `exitCode`. */
export class CliError extends Error {
  readonly exitCode: number;

  constructor(message: string, exitCode: number = ExitCode.cannotRun) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

/** How long connecting to PostgreSQL or the API server may take before the CLI says it is unreachable. */
const CONNECT_TIMEOUT_MS = 15_000;

/** The database URL without its password: safe to print. */
export function describeDatabaseUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.password = '';
    parsed.search = '';
    return parsed.toString();
  } catch {
    return '(unparsable URL)';
  }
}

function withTimeout<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what}: no answer within ${CONNECT_TIMEOUT_MS / 1000}s`)),
      CONNECT_TIMEOUT_MS,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function reasonOf(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0) return reasonOf(err.errors[0]);
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown }).code;
  return message || (typeof code === 'string' ? code : 'unknown error');
}

const kubeConfigHasNoContext = (err: unknown) =>
  err instanceof Error && / has no context "/.test(err.message);

export interface ContextOptions {
  env: Readonly<Record<string, string | undefined>>;
  /** `--kubeconfig`: wins over KUBECONFIG. */
  kubeconfigPath?: string;
  /** `--context`: this context of the kubeconfig for every Kubernetes call, instead of its current-context. */
  contextName?: string;
}

export interface Context {
  /** The database, reachable (checked with one query), or a CliError. */
  db(): Promise<Db>;
  /** The kubeconfig, with the API server reachable (GET /version), or a CliError. */
  kube(): Promise<KubeConfig>;
  /** The kubeconfig as loaded (its context selected), without contacting the API server. */
  kubeConfig(): KubeConfig;
  /** The namespace of the kubeconfig's selected context, if it names one (kubectl's default for -n). */
  contextNamespace(): string | undefined;
  /** DATABASE_URL as configured (with its password: never print it), or a CliError. */
  databaseUrl(): string;
  /** A secret a command came to hold (e.g. a password it issued): no filtered line prints it. */
  addSecret(value: string): void;
  /** The sealing keys of GITOPS_ENCRYPTION_KEYS, or a CliError (exit 2). */
  encryptionKeys(): EncryptionKeys;
  sealer(): Sealer;
  /** The API server's URL (for messages). */
  apiServer(): string;
  /** Every secret value the CLI was configured with, for the output filter. */
  secrets(): string[];
  close(): Promise<void>;
}

export function createContext(options: ContextOptions): Context {
  const { env } = options;
  let db: Db | undefined;
  let dbReady: Promise<Db> | undefined;
  let kc: KubeConfig | undefined;
  let kubeReady: Promise<KubeConfig> | undefined;
  let keys: EncryptionKeys | undefined;
  const secrets: string[] = [];

  /**
   * A setting read as the services read it; a ConfigError is a CliError with its issues, or, when `required`
   * names a variable that is not set, with what to set it to.
   */
  function setting<T>(read: () => T, required?: { name: string; hint: string }): T {
    try {
      return read();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      const unset = required !== undefined && (env[required.name] === undefined || env[required.name] === '');
      throw new CliError(
        unset ? `${required.name} is not set: ${required.hint}` : err.issues.map((i) => i.message).join('; '),
      );
    }
  }

  function databaseUrl(): string {
    const url = setting(() => loadConfig({ url: databaseUrlVar }, env).url, {
      name: 'DATABASE_URL',
      hint: 'set it to the PostgreSQL connection string the backend uses (a postgres:// URL)',
    });
    const password = new URL(url).password;
    if (password) secrets.push(password, decodeURIComponent(password));
    return url;
  }

  /** GITOPS_DATABASE_PREPARED_STATEMENTS, as the services take it: false behind a transaction-mode pooler. */
  function preparedStatements(): boolean {
    return setting(() => loadConfig({ prepared: databasePreparedStatementsVar }, env).prepared);
  }

  function kubeConfig(): KubeConfig {
    if (kc) return kc;
    const path = options.kubeconfigPath || env.KUBECONFIG || undefined;
    if (path === undefined) {
      const home = join(homedir(), '.kube', 'config');
      const inCluster =
        env.KUBERNETES_SERVICE_HOST !== undefined &&
        existsSync('/var/run/secrets/kubernetes.io/serviceaccount/token');
      if (!existsSync(home) && !inCluster) {
        throw new CliError(
          `no kubeconfig: set KUBECONFIG (or pass --kubeconfig <file>); there is no ${home} and no in-cluster service account`,
        );
      }
    }
    try {
      kc = loadKubeConfig(path, { context: options.contextName });
    } catch (err) {
      const where = path === undefined ? 'the default kubeconfig' : `kubeconfig ${path}`;
      const source = options.kubeconfigPath ? ' (--kubeconfig)' : path ? ' (KUBECONFIG)' : '';
      const cause = (err as Error).cause;
      // Read, but without the context asked for: the loader's message names the contexts it has.
      if (cause === undefined && options.contextName !== undefined && kubeConfigHasNoContext(err)) {
        throw new CliError(`--context ${options.contextName}: ${reasonOf(err)}${source}`);
      }
      throw new CliError(`cannot load ${where}${source}: ${reasonOf(cause ?? err)}`);
    }
    for (const user of kc.users) {
      for (const value of [user.token, user.password, user.keyData]) if (value) secrets.push(value);
    }
    return kc;
  }

  function encryptionKeys(): EncryptionKeys {
    if (keys) return keys;
    keys = setting(() => loadConfig({ keys: encryptionKeysVar('GITOPS_ENCRYPTION_KEYS') }, env).keys, {
      name: 'GITOPS_ENCRYPTION_KEYS',
      hint: 'set it to the keys the backend and the cluster-agent use (id=<base64 of 32 bytes>,...; the first is active)',
    });
    for (const key of keys.keys) secrets.push(Buffer.from(key.key).toString('base64'));
    return keys;
  }

  const apiServer = () => {
    try {
      return kubeConfig().getCurrentCluster()?.server ?? '(unknown)';
    } catch {
      return '(no kubeconfig)';
    }
  };

  return {
    db() {
      dbReady ??= (async () => {
        const url = databaseUrl();
        db = createDb(url, {
          max: 4,
          applicationName: 'kubectl-gitops',
          preparedStatements: preparedStatements(),
        });
        try {
          await withTimeout(db.selectNoFrom((eb) => eb.lit(1).as('one')).execute(), 'connecting');
        } catch (err) {
          throw new CliError(
            `cannot reach the database of DATABASE_URL (${describeDatabaseUrl(url)}): ${reasonOf(err)}`,
          );
        }
        return db;
      })();
      return dbReady;
    },
    kube() {
      kubeReady ??= (async () => {
        const config = kubeConfig();
        try {
          await withTimeout(
            kubeRequest(config, { method: HttpMethod.GET, path: '/version', timeoutMs: CONNECT_TIMEOUT_MS }),
            'connecting',
          );
        } catch (err) {
          if (err instanceof KubeApiError && err.statusCode !== 0) {
            throw new CliError(
              `the Kubernetes API server ${apiServer()} refused the request: ${err.message}`,
            );
          }
          throw new CliError(`cannot reach the Kubernetes API server ${apiServer()}: ${reasonOf(err)}`);
        }
        return config;
      })();
      return kubeReady;
    },
    kubeConfig,
    contextNamespace() {
      const config = kubeConfig();
      return config.getContextObject(config.getCurrentContext())?.namespace || undefined;
    },
    databaseUrl,
    addSecret(value) {
      if (value) secrets.push(value, encodeURIComponent(value));
    },
    encryptionKeys,
    sealer() {
      const { keys: list, activeKeyId } = encryptionKeys();
      return createSealer({ keys: list, activeKeyId });
    },
    apiServer,
    secrets() {
      // The raw key material too, whatever it holds (a malformed key list is still secret).
      const raw = (env.GITOPS_ENCRYPTION_KEYS ?? '')
        .split(',')
        .map((entry) => entry.slice(entry.indexOf('=') + 1).trim())
        .filter((value) => value.length >= 8);
      return [...secrets, ...raw];
    },
    async close() {
      // A connection attempt that never got an answer must not keep the CLI from exiting.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        db?.destroy().catch(() => {}),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, 2_000);
        }),
      ]);
      clearTimeout(timer);
    },
  };
}
