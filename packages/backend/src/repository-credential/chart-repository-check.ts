/**
 * Validates a Helm repository or an OCI registry and its credentials the way Argo CD's repo-server reads
 * them (issue 35): a Helm repository by its `index.yaml`, an OCI registry by its `/v2/` endpoint (with the
 * registry's token exchange when it asks for a bearer token). Same outcomes as `git ls-remote`
 * (git-ls-remote.ts) so the conditions are the same:
 * 1. 200 → `valid`;
 * 2. 401/403 with the credentials → `invalidCredentials` (the repository answers, and refused them);
 * 3. anything else (404, DNS, connection refused, TLS) → `invalidUrl`;
 * 4. the timeout → `unreachable`.
 * Credentials go only into an Authorization header; never into a URL, a log line or a message. Private CAs:
 * the same file as Git's (GIT_SSL_CAINFO), added to Node's own roots.
 */
import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { rootCertificates } from 'node:tls';
import type { GitCredentials, LsRemoteOutcome } from './git-ls-remote.ts';
import { LS_REMOTE_TIMEOUT_MS } from './git-ls-remote.ts';

/** The kinds of repository this module checks (git is git-ls-remote.ts's). */
export type ChartRepositoryType = 'helm' | 'oci';

/** What every request of one check shares. */
interface Context {
  signal: AbortSignal;
  /** The roots it trusts. */
  ca: string[];
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** The roots a check trusts: Node's, and the private CAs of GIT_SSL_CAINFO (read once). */
let trusted: string[] | undefined;
function trustedCertificates(): string[] {
  if (trusted) return trusted;
  const file = process.env.GIT_SSL_CAINFO;
  let extra: string[] = [];
  try {
    if (file) extra = [readFileSync(file, 'utf8')];
  } catch {
    extra = []; // a missing file: Git would fail on it too, and say so in its own checks
  }
  trusted = [...rootCertificates, ...extra];
  return trusted;
}

/** One GET; bodies are read up to 64 KiB (a token answer; an index is only looked at for its status). */
function get(url: URL, authorization: string | undefined, context: Context): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const options = {
      method: 'GET',
      signal: context.signal,
      headers: authorization ? { authorization } : {},
      ...(url.protocol === 'https:' ? { ca: context.ca } : {}),
    };
    const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, options, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (body.length < 65_536) body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const basic = (c: GitCredentials) =>
  c.username !== undefined && c.password !== undefined
    ? `Basic ${Buffer.from(`${c.username}:${c.password}`, 'utf8').toString('base64')}`
    : undefined;

function outcomeOf(answer: Answer, what: string): LsRemoteOutcome {
  if (answer.status >= 200 && answer.status < 300) return { result: 'valid' };
  if (answer.status === 401 || answer.status === 403) return { result: 'invalidCredentials' };
  return { result: 'invalidUrl', detail: `${what} answered HTTP ${answer.status}` };
}

/** `Bearer realm="...",service="...",scope="..."` → its parameters. */
function bearerChallenge(header: string | undefined): Record<string, string> | undefined {
  if (!header || !/^bearer\s/i.test(header)) return undefined;
  const params: Record<string, string> = {};
  for (const [, key, value] of header.matchAll(/([a-z]+)="([^"]*)"/gi)) params[key!.toLowerCase()] = value!;
  return params.realm ? params : undefined;
}

async function checkHelm(url: string, credentials: GitCredentials, context: Context) {
  const index = new URL(`${url.replace(/\/+$/, '')}/index.yaml`);
  return outcomeOf(await get(index, basic(credentials), context), 'the Helm repository');
}

async function checkOci(url: string, credentials: GitCredentials, context: Context) {
  const registry = new URL(url.replace(/^oci:\/\//i, 'https://'));
  const repository = registry.pathname.replace(/^\/+|\/+$/g, '');
  const base = new URL('/v2/', registry);
  const first = await get(base, basic(credentials), context);
  const challenge =
    first.status === 401 ? bearerChallenge(String(first.headers['www-authenticate'])) : undefined;
  if (!challenge) return outcomeOf(first, 'the OCI registry');
  // The registry's token exchange: the credentials buy a pull token for the repository.
  const token = new URL(challenge.realm!);
  if (challenge.service) token.searchParams.set('service', challenge.service);
  if (repository) token.searchParams.set('scope', `repository:${repository}:pull`);
  const granted = await get(token, basic(credentials), context);
  if (granted.status !== 200) return outcomeOf(granted, "the OCI registry's token service");
  let bearer: string | undefined;
  try {
    const body = JSON.parse(granted.body) as { token?: unknown; access_token?: unknown };
    bearer = typeof body.token === 'string' ? body.token : (body.access_token as string | undefined);
  } catch {
    bearer = undefined;
  }
  if (!bearer)
    return { result: 'invalidUrl', detail: "the OCI registry's token service gave no token" } as const;
  return outcomeOf(await get(base, `Bearer ${bearer}`, context), 'the OCI registry');
}

/**
 * Checks `url` (a Helm repository or an OCI registry) with `credentials` (username and password), within
 * `timeoutMs` (the same 30 s as `git ls-remote`), trusting `ca` (default: Node's roots and GIT_SSL_CAINFO's).
 */
export async function checkChartRepository(
  type: ChartRepositoryType,
  url: string,
  credentials: GitCredentials,
  options: { signal?: AbortSignal; timeoutMs?: number; ca?: string[] } = {},
): Promise<LsRemoteOutcome> {
  const timeout = AbortSignal.timeout(options.timeoutMs ?? LS_REMOTE_TIMEOUT_MS);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  const context = { signal, ca: options.ca ?? trustedCertificates() };
  try {
    return type === 'helm'
      ? await checkHelm(url, credentials, context)
      : await checkOci(url, credentials, context);
  } catch (error) {
    if (timeout.aborted) return { result: 'unreachable', detail: 'the repository did not answer in time' };
    const code = (error as { code?: unknown }).code;
    return {
      result: 'invalidUrl',
      detail: `the repository could not be reached (${typeof code === 'string' ? code : 'no answer'})`,
    };
  }
}
