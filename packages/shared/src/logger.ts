/**
 * The one logger factory: pino, JSON lines on stdout, secrets removed before anything is written.
 *
 * Redaction is by key name at any depth (pino's path-based `redact` cannot express "any depth"),
 * plus scrubbing of strings: passwords in connection strings (`postgres://user:PASSWORD@host`,
 * `password=...`) and bearer tokens. The `data`/`stringData` of Kubernetes Secrets are removed.
 * It runs on every log call; logs are not on a hot path here (a few lines per reconcile).
 */
import { Writable } from 'node:stream';
import pino, { type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from './config.ts';

export type { Logger } from 'pino';

export const REDACTED = '[REDACTED]';

export interface CreateLoggerOptions {
  /** Component name, e.g. `backend`, `cluster-agent`, `gitopsdeployment-controller`. */
  name: string;
  level?: LogLevel;
  /** Where lines go; stdout by default. Tests pass a collecting stream. */
  destination?: DestinationStream;
}

/** Creates a JSON logger that never writes secret values. */
export function createLogger(options: CreateLoggerOptions): Logger {
  const logger = pino(
    {
      name: options.name,
      level: options.level ?? 'info',
      // Errors are serialized by `redactSecrets` (formatters.log runs before serializers).
      serializers: { err: (value: unknown) => value },
      formatters: {
        bindings: (bindings) => redactSecrets(bindings) as Record<string, unknown>,
        log: (object) => redactSecrets(object) as Record<string, unknown>,
      },
      hooks: {
        logMethod(args, method) {
          const [first, ...rest] = args as unknown[];
          // logger.error(err) without a message: pino would use err.message unscrubbed.
          if (first instanceof Error && typeof rest[0] !== 'string') {
            return method.apply(this, [{ err: first }, scrubString(first.message), ...rest] as never);
          }
          return method.apply(
            this,
            args.map((arg) => (typeof arg === 'string' ? scrubString(arg) : arg)) as never,
          );
        },
      },
    },
    options.destination ?? pino.destination({ fd: 1, sync: true }),
  );
  // pino applies `formatters.bindings` to the root bindings only; children inherit this wrapper
  // (a child is `Object.create(parent)`), so `logger.child({ token })` is redacted at any depth.
  const pinoChild = logger.child;
  logger.child = function child(this: Logger, bindings: Record<string, unknown>, childOptions?: unknown) {
    return pinoChild.call(this, redactSecrets(bindings) as Record<string, unknown>, childOptions as never);
  } as typeof logger.child;
  return logger;
}

/** A logger that writes nothing (tests, libraries called without one). */
export function createSilentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** A destination stream that keeps the parsed lines in memory, for tests. */
export function createMemoryDestination(): DestinationStream & {
  lines: Record<string, unknown>[];
  text: () => string;
} {
  const lines: Record<string, unknown>[] = [];
  const raw: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      const text = String(chunk);
      raw.push(text);
      for (const line of text.split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line));
      callback();
    },
  });
  return Object.assign(stream, { lines, text: () => raw.join('') });
}

/** Normalised key names (lower case, no `_`/`-`) that always hold secrets. */
const secretKeys = new Set([
  'authorization',
  'proxyauthorization',
  'cookie',
  'setcookie',
  'kubeconfig',
  'databaseurl',
  'connectionstring',
  'sshprivatekey',
  'privatekey',
  'tlsclientcertkey',
  'clientkeydata',
  'clientkey',
  'keydata',
  'bearertoken',
  'apikey',
  'sealingkey',
  'encryptionkey',
]);

/** Keys ending like these hold secrets too (`gitPassword`, `clusterToken`, `clientSecret`). */
const secretSuffix = /(password|passwd|passphrase|token|secret|privatekey|apikey|credentials?)$/;

function isSecretKey(key: string): boolean {
  const normalised = key.toLowerCase().replace(/[-_]/g, '');
  return secretKeys.has(normalised) || secretSuffix.test(normalised);
}

/**
 * Removes secrets from a string: URL userinfo passwords, `password=` pairs, bearer tokens,
 * `Authorization: Basic` credentials, PEM private key blocks, and the value Node's argument checks quote
 * (`The argument 'args[3]' must be a string without null bytes. Received '<the value>'`: the value may be a
 * credential handed to a child process, and the message ends up in `err.message` and `err.stack`), and the
 * header value fetch quotes when it refuses one (a token with a line break or NUL).
 */
export function scrubString(text: string): string {
  if (text.length === 0) return text;
  return (
    text
      // scheme://user:password@host → scheme://user:[REDACTED]@host
      // (errs on the side of over-redacting `http://host:port/x@y`)
      .replace(/([a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:)[^\s@]+@/gi, `$1${REDACTED}@`)
      // libpq keyword form and query parameters: password=..., sslpassword=...
      .replace(
        /\b(password|passwd|pwd|sslpassword|token|access_token)=('[^']*'|[^\s&;]+)/gi,
        `$1=${REDACTED}`,
      )
      .replace(/\b(bearer)\s+[a-z0-9._~+/=-]+/gi, `$1 ${REDACTED}`)
      .replace(/\b(authorization:\s*basic)\s+[a-z0-9+/=]+/gi, `$1 ${REDACTED}`)
      .replace(/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)/g, REDACTED)
      // Node's ERR_INVALID_ARG_VALUE / ERR_INVALID_ARG_TYPE / ERR_OUT_OF_RANGE: ". Received <value>" to the end
      // of the line (util.inspect escapes line breaks inside the quoted value).
      .replace(/(\. Received) [^\n]*/g, `$1 ${REDACTED}`)
      // fetch (undici) refusing a header: `Headers.append: "Bearer <token>" is an invalid header value.`
      .replace(/(Headers\.\w+: )"[\s\S]*?"( is an invalid header (?:value|name))/g, `$1${REDACTED}$2`)
  );
}

/**
 * Returns a copy of `value` with secret-looking fields replaced by `[REDACTED]` at any depth,
 * strings scrubbed, Errors serialized (message, stack, cause and own fields), and cycles cut.
 */
export function redactSecrets(value: unknown): unknown {
  return redactValue(value, new WeakSet(), 0);
}

const maxDepth = 12;

function redactValue(value: unknown, seen: WeakSet<object>, depth: number): unknown {
  if (typeof value === 'string') return scrubString(value);
  if (typeof value !== 'object' || value === null) return value;
  if (seen.has(value)) return '[Circular]';
  if (depth >= maxDepth) return '[Truncated]';
  seen.add(value);
  try {
    if (value instanceof Error) return redactValue(serializeError(value), seen, depth + 1);
    if (Array.isArray(value)) return value.map((item) => redactValue(item, seen, depth + 1));
    if (value instanceof Date) return value.toISOString();
    if (Buffer.isBuffer(value) || ArrayBuffer.isView(value)) return `[${value.byteLength} bytes]`;
    if (value instanceof Map) return redactValue(Object.fromEntries(value), seen, depth + 1);
    const isKubernetesSecret = (value as { kind?: unknown }).kind === 'Secret';
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      if (isSecretKey(key) || (isKubernetesSecret && (key === 'data' || key === 'stringData'))) {
        out[key] = item === undefined || item === null || item === '' ? item : REDACTED;
      } else {
        out[key] = redactValue(item, seen, depth + 1);
      }
    }
    return out;
  } finally {
    seen.delete(value);
  }
}

function serializeError(err: Error): Record<string, unknown> {
  const out: Record<string, unknown> = { type: err.name, message: err.message, stack: err.stack };
  for (const [key, item] of Object.entries(err)) if (!(key in out)) out[key] = item;
  if (err.cause !== undefined) out.cause = err.cause;
  return out;
}
