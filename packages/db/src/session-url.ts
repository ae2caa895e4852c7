/**
 * The connection string of the sessions that must be PostgreSQL's own: LISTEN (notify.ts), the session advisory
 * locks (active-lock.ts, holdAgentListeningLock) and the backend's migration (Kysely's migrator holds a session
 * lock around it). A transaction-mode pooler (PgBouncer, docs/database-connections.md) gives each transaction
 * whichever server session is free, so none of these can go through it; the pools can.
 */
import type { DatabaseAddress } from '@gitops/shared';

/** Query parameters that would send node-postgres elsewhere than the URL's host and port. */
const ADDRESS_PARAMETERS = ['host', 'hostaddr', 'port'] as const;

/**
 * `databaseUrl` with its host and port replaced by `sessionAddress` (`DATABASE_SESSION_ADDRESS`), keeping its
 * user, password, database and parameters: an agent's `DATABASE_URL` carries its engine instance's own role,
 * so its sessions log in with that role as its pool does, and no second secret is needed. A `host`, `hostaddr`
 * or `port` query parameter is dropped, since it would override the address. Without an address, `databaseUrl`
 * itself.
 */
export function sessionDatabaseUrl(databaseUrl: string, sessionAddress: DatabaseAddress | undefined): string {
  if (sessionAddress === undefined) return databaseUrl;
  const url = URL.canParse(databaseUrl) ? new URL(databaseUrl) : undefined;
  if (url?.protocol !== 'postgres:' && url?.protocol !== 'postgresql:') {
    // The value is never echoed: it holds a password.
    throw new TypeError('DATABASE_URL is not a postgres:// URL (its value is not shown)');
  }
  url.hostname = sessionAddress.host.includes(':') ? `[${sessionAddress.host}]` : sessionAddress.host;
  url.port = String(sessionAddress.port);
  for (const name of ADDRESS_PARAMETERS) {
    if (url.searchParams.has(name)) url.searchParams.delete(name);
  }
  return url.toString();
}
