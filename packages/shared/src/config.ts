/**
 * The one config loader: every knob is an environment variable with a default and bounds
 * (Argo CD's habit), validated once at start-up. A service composes a schema from the helpers
 * below and calls `loadConfig(schema)`; all bad variables are reported together in one `ConfigError`.
 *
 * An empty value counts as unset (Kubernetes manifests often render `value: ""`).
 */
import { z } from 'zod';
import { ConfigError, type ConfigIssue } from './errors.ts';

/** One environment variable: its name, how to parse it, and whether its value may be echoed. */
export interface EnvVar<T> {
  readonly name: string;
  /** Takes the raw value (`undefined` when unset or empty), outputs the typed value. */
  readonly schema: z.ZodType<T, string | undefined>;
  /** Secret values are never echoed in error messages. */
  readonly secret: boolean;
  readonly description: string;
}

/** A config schema: property name → environment variable. */
export type ConfigSchema = Record<string, EnvVar<unknown>>;

/** The typed, frozen config object produced by `loadConfig(schema)`. */
export type ConfigOf<S extends ConfigSchema> = {
  readonly [K in keyof S]: S[K] extends EnvVar<infer T> ? T : never;
};

/**
 * Reads and validates every variable of `schema` from `env`.
 * @throws ConfigError listing every invalid variable, e.g.
 *   `GITOPS_RESYNC_SECONDS must be between 30 and 86400 (got "5")`.
 */
export function loadConfig<S extends ConfigSchema>(
  schema: S,
  env: Readonly<Record<string, string | undefined>> = process.env,
): ConfigOf<S> {
  const issues: ConfigIssue[] = [];
  const config: Record<string, unknown> = {};
  for (const [property, variable] of Object.entries(schema)) {
    const raw = env[variable.name];
    const value = raw === undefined || raw === '' ? undefined : raw;
    const result = variable.schema.safeParse(value);
    if (result.success) {
      config[property] = result.data;
      continue;
    }
    const reason = result.error.issues[0]?.message ?? 'is invalid';
    const got =
      value === undefined ? '' : variable.secret ? ' (got a value, not shown)' : ` (got "${value}")`;
    issues.push({ name: variable.name, message: `${variable.name} ${reason}${got}` });
  }
  if (issues.length > 0) throw new ConfigError(issues);
  return Object.freeze(config) as ConfigOf<S>;
}

interface VarOptions {
  description?: string;
  secret?: boolean;
}

/** A `z.string().optional()` piped into `parse`, which returns the value or an error reason. */
function envVar<T>(
  name: string,
  options: VarOptions,
  parse: (raw: string | undefined) => { value: T } | { error: string },
): EnvVar<T> {
  const schema = z
    .string()
    .optional()
    .transform((raw, ctx) => {
      const result = parse(raw);
      if ('error' in result) {
        ctx.addIssue({ code: 'custom', message: result.error });
        return z.NEVER;
      }
      return result.value;
    });
  return { name, schema, secret: options.secret ?? false, description: options.description ?? '' };
}

/** An integer with inclusive bounds. */
export function intVar(
  name: string,
  options: VarOptions & { default: number; min: number; max: number },
): EnvVar<number> {
  const { min, max } = options;
  return envVar<number>(name, options, (raw) => {
    if (raw === undefined) return { value: options.default };
    const trimmed = raw.trim();
    if (!/^[-+]?\d+$/.test(trimmed)) return { error: `must be an integer between ${min} and ${max}` };
    const value = Number(trimmed);
    if (value < min || value > max) return { error: `must be between ${min} and ${max}` };
    return { value };
  });
}

const durationUnitsMs = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 } as const;

/**
 * Parses a Go-style duration (`250ms`, `30s`, `5m`, `1h30m`) into milliseconds.
 * Returns `undefined` for anything else, including a bare number (its unit would be a guess).
 */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(trimmed)) return undefined;
  let total = 0;
  for (const match of trimmed.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) {
    total += Number(match[1]) * durationUnitsMs[match[2] as keyof typeof durationUnitsMs];
  }
  return Math.round(total);
}

/** Formats milliseconds the way `parseDuration` reads them (`90000` → `1m30s`). */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  let rest = ms;
  let text = '';
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
    ['ms', 1],
  ] as const) {
    const count = Math.floor(rest / size);
    if (count > 0) {
      text += `${count}${unit}`;
      rest -= count * size;
    }
  }
  return text;
}

/** A duration (`30s`, `5m`, `1h`) with inclusive bounds; the value is in milliseconds. */
export function durationVar(
  name: string,
  options: VarOptions & { default: string; min: string; max: string },
): EnvVar<number> {
  const defaultMs = mustParseDuration(options.default);
  const minMs = mustParseDuration(options.min);
  const maxMs = mustParseDuration(options.max);
  return envVar<number>(name, options, (raw) => {
    if (raw === undefined) return { value: defaultMs };
    const value = parseDuration(raw);
    if (value === undefined) {
      return {
        error: `must be a duration like 500ms, 30s, 5m or 1h between ${options.min} and ${options.max}`,
      };
    }
    if (value < minMs || value > maxMs) return { error: `must be between ${options.min} and ${options.max}` };
    return { value };
  });
}

function mustParseDuration(text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined) throw new Error(`invalid duration literal in config schema: ${text}`);
  return ms;
}

const trueWords = ['true', '1', 'yes', 'on'];
const falseWords = ['false', '0', 'no', 'off'];

/** A boolean: true/false, 1/0, yes/no, on/off (any case). */
export function boolVar(name: string, options: VarOptions & { default: boolean }): EnvVar<boolean> {
  return envVar<boolean>(name, options, (raw) => {
    if (raw === undefined) return { value: options.default };
    const word = raw.trim().toLowerCase();
    if (trueWords.includes(word)) return { value: true };
    if (falseWords.includes(word)) return { value: false };
    return { error: 'must be true or false' };
  });
}

/** One of a fixed list of values (exact match). */
export function enumVar<const V extends readonly [string, ...string[]]>(
  name: string,
  values: V,
  options: VarOptions & { default: V[number] },
): EnvVar<V[number]> {
  return envVar<V[number]>(name, options, (raw) => {
    if (raw === undefined) return { value: options.default };
    const value = raw.trim();
    if ((values as readonly string[]).includes(value)) return { value: value as V[number] };
    return { error: `must be one of ${values.join(', ')}` };
  });
}

type UrlVarOptions = VarOptions & {
  /** Allowed schemes including the colon, e.g. `['postgres:', 'postgresql:']`. Any scheme when omitted. */
  protocols?: readonly string[];
};

/** A URL that must be set. */
export function requiredUrlVar(name: string, options: UrlVarOptions = {}): EnvVar<string> {
  return envVar(name, options, (raw) =>
    raw === undefined ? { error: 'is required' } : checkUrl(raw, options),
  );
}

/** A URL with a default. */
export function urlVar(name: string, options: UrlVarOptions & { default: string }): EnvVar<string> {
  return envVar(name, options, (raw) => checkUrl(raw ?? options.default, options));
}

function checkUrl(raw: string, options: UrlVarOptions): { value: string } | { error: string } {
  const text = raw.trim();
  if (!URL.canParse(text)) return { error: 'must be a URL' };
  const { protocol } = new URL(text);
  if (options.protocols && !options.protocols.includes(protocol)) {
    return {
      error: `must be a URL with scheme ${options.protocols.map((p) => p.slice(0, -1)).join(' or ')}`,
    };
  }
  return { value: text };
}

/** A string with a default and a maximum length. */
export function stringVar(
  name: string,
  options: VarOptions & { default: string; maxLength?: number; pattern?: RegExp },
): EnvVar<string> {
  return envVar<string>(name, options, (raw) => {
    const value = raw ?? options.default;
    if (options.maxLength !== undefined && value.length > options.maxLength) {
      return { error: `must be at most ${options.maxLength} characters` };
    }
    if (options.pattern && !options.pattern.test(value)) return { error: `must match ${options.pattern}` };
    return { value };
  });
}

/** A string that may be unset (e.g. a file path). */
export function optionalStringVar(name: string, options: VarOptions = {}): EnvVar<string | undefined> {
  return envVar(name, options, (raw) => ({ value: raw }));
}

// ---- common fields, for services to compose ----------------------------------------------------

export const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof logLevels)[number];

/** Fields both services share. Compose: `loadConfig({ ...commonConfig, myField: intVar(...) })`. */
export const commonConfig = {
  logLevel: enumVar('LOG_LEVEL', logLevels, { default: 'info', description: 'pino log level' }),
  httpHost: stringVar('HTTP_HOST', {
    default: '0.0.0.0',
    maxLength: 253,
    description: 'address of the /healthz, /readyz, /metrics server',
  }),
  httpPort: intVar('HTTP_PORT', {
    default: 8080,
    min: 0,
    max: 65535,
    description: 'port of the /healthz, /readyz, /metrics server (0 = any free port)',
  }),
  kubeconfigPath: optionalStringVar('KUBECONFIG', {
    description: 'kubeconfig file; in-cluster service account when unset',
  }),
  shutdownTimeoutMs: durationVar('GITOPS_SHUTDOWN_TIMEOUT', {
    default: '25s',
    min: '1s',
    max: '10m',
    // Kubernetes sends SIGKILL 30 s after SIGTERM by default; finish before that.
    description: 'hard limit for graceful shutdown',
  }),
  resyncSeconds: intVar('GITOPS_RESYNC_SECONDS', {
    default: 600,
    min: 30,
    max: 86400,
    description: 'period of the jittered full relist/resync of every informer (safety net only)',
  }),
  maxConcurrentReconciles: intVar('GITOPS_MAX_CONCURRENT_RECONCILES', {
    default: 4,
    min: 1,
    max: 256,
    description: 'concurrent reconciles per controller',
  }),
} as const;

/**
 * `GITOPS_DATABASE_PREPARED_STATEMENTS`: repeated statements as named prepared statements (@gitops/db
 * named-statements.ts). Off behind a pooler that cannot keep them (PgBouncer in transaction mode before 1.21).
 */
export const databasePreparedStatementsVar = boolVar('GITOPS_DATABASE_PREPARED_STATEMENTS', {
  default: true,
  description:
    'send repeated statements as named prepared statements (false behind a transaction-mode pooler)',
});

/** `DATABASE_URL`: required, postgres scheme, secret (its password is never echoed or logged). */
export const databaseUrlVar = requiredUrlVar('DATABASE_URL', {
  protocols: ['postgres:', 'postgresql:'],
  secret: true,
  description: 'PostgreSQL connection string',
});

/**
 * `ARGOCD_NAMESPACE`: the engine instance's Argo CD namespace, a DNS-1123 label; both processes of an instance
 * read it (`description` says what each does with it).
 */
export const argoCdNamespaceVar = (description: string) =>
  stringVar('ARGOCD_NAMESPACE', {
    default: 'gitops-service-argocd',
    maxLength: 63,
    pattern: /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/,
    description,
  });

/** `ENGINE_INSTANCE_NAME`: the stable name of the engine_instance row, any non-blank text up to 253 characters. */
export const engineInstanceNameVar = (description: string) =>
  stringVar('ENGINE_INSTANCE_NAME', { default: 'default', maxLength: 253, pattern: /^\S+$/, description });

/** A PostgreSQL server's address: a host name, an IPv4 address or a bracketed IPv6 address, and a port. */
export interface DatabaseAddress {
  /** As written, brackets of an IPv6 address removed. */
  readonly host: string;
  readonly port: number;
}

/**
 * Reads `host:port`: `db.example:5432`, `10.0.0.7:5432`, `[fd00::7]:5432`. Undefined for anything else (no
 * port, a port outside 1-65535, a scheme, a user, a path).
 */
export function parseDatabaseAddress(text: string): DatabaseAddress | undefined {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)):(\d{1,5})$/.exec(
    text.trim(),
  );
  if (!match) return undefined;
  const host = match[1] ?? match[2];
  const port = Number(match[3]);
  if (host === undefined || port < 1 || port > 65535) return undefined;
  if (match[1] !== undefined && !match[1].includes(':')) return undefined;
  return { host, port };
}

/**
 * `DATABASE_SESSION_ADDRESS`: where the sessions that must be PostgreSQL's own go (LISTEN, the session advisory
 * locks, the backend's migration), when `DATABASE_URL` points at a transaction-mode pooler such as PgBouncer.
 * They use `DATABASE_URL`'s user, password, database and parameters (`sessionDatabaseUrl` of @gitops/db).
 * Unset: everything goes to `DATABASE_URL`.
 */
export const databaseSessionAddressVar = envVar<DatabaseAddress | undefined>(
  'DATABASE_SESSION_ADDRESS',
  {
    description:
      "host:port of PostgreSQL itself for the LISTEN, advisory-lock and migration sessions, when DATABASE_URL is a transaction-mode pooler's (DATABASE_URL's user, password, database and parameters); unset: DATABASE_URL's",
  },
  (raw) => {
    if (raw === undefined) return { value: undefined };
    const address = parseDatabaseAddress(raw);
    return address
      ? { value: address }
      : { error: 'must be host:port of PostgreSQL, e.g. postgres.db.svc:5432 or [fd00::7]:5432' };
  },
);
