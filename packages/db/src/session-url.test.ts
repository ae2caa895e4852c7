import assert from 'node:assert/strict';
import pg from 'pg';
import { describe, it } from 'vitest';
import { agentDatabaseUrl } from './engine-instance-role.repository.ts';
import { sessionDatabaseUrl } from './session-url.ts';

/** What node-postgres reads from a connection string (nothing is connected). */
function parseConnectionString(url: string) {
  const client = new pg.Client({ connectionString: url });
  return {
    host: client.host,
    port: String(client.port),
    user: client.user,
    password: client.password ?? undefined,
    database: client.database,
  };
}

describe('sessionDatabaseUrl', () => {
  it('is DATABASE_URL itself without a session address', () => {
    const url = 'postgres://gitops:secret@pgbouncer.db.svc:6432/gitops?sslmode=require';
    assert.equal(sessionDatabaseUrl(url, undefined), url);
  });

  it("goes to the session address with DATABASE_URL's user, password, database and parameters", () => {
    const url =
      'postgres://gitops:p%40ss@pgbouncer.db.svc:6432/gitops?sslmode=verify-full&sslrootcert=/etc/gitops-service/postgres-ca/ca.crt';
    const session = sessionDatabaseUrl(url, { host: 'postgres.db.svc', port: 5432 });
    assert.equal(
      session,
      'postgres://gitops:p%40ss@postgres.db.svc:5432/gitops?sslmode=verify-full&sslrootcert=/etc/gitops-service/postgres-ca/ca.crt',
    );
    // What node-postgres reads (it would read the CA file at once: a URL without it).
    const parsed = parseConnectionString(
      sessionDatabaseUrl('postgres://gitops:p%40ss@pgbouncer.db.svc:6432/gitops?sslmode=disable', {
        host: 'postgres.db.svc',
        port: 5432,
      }),
    );
    assert.equal(parsed.host, 'postgres.db.svc');
    assert.equal(parsed.port, '5432');
    assert.equal(parsed.user, 'gitops');
    assert.equal(parsed.password, 'p@ss');
    assert.equal(parsed.database, 'gitops');
  });

  it("keeps an agent's own role: the URL `instances admit` made from the pooler's", () => {
    const agentUrl = agentDatabaseUrl('postgresql://gitops:backend@pgbouncer:6432/gitops', {
      role: 'gitops_ei_4f0c',
      password: 'Qk3/+x',
    });
    const parsed = parseConnectionString(sessionDatabaseUrl(agentUrl, { host: '10.0.0.7', port: 5433 }));
    assert.deepEqual(
      [parsed.host, parsed.port, parsed.user, parsed.password, parsed.database],
      ['10.0.0.7', '5433', 'gitops_ei_4f0c', 'Qk3/+x', 'gitops'],
    );
  });

  it('brackets an IPv6 address, and adds the port when DATABASE_URL had none', () => {
    assert.equal(
      sessionDatabaseUrl('postgres://u:p@pgbouncer/gitops', { host: 'fd00::7', port: 5432 }),
      'postgres://u:p@[fd00::7]:5432/gitops',
    );
    assert.equal(parseConnectionString('postgres://u:p@[fd00::7]:5432/gitops').host, 'fd00::7');
  });

  it('drops host, hostaddr and port parameters, which would override the address', () => {
    const session = sessionDatabaseUrl(
      'postgres://u:p@pgbouncer:6432/gitops?host=/run/pgbouncer&port=6432&application_name=x',
      {
        host: 'postgres',
        port: 5432,
      },
    );
    assert.equal(session, 'postgres://u:p@postgres:5432/gitops?application_name=x');
    const parsed = parseConnectionString(session);
    assert.equal(parsed.host, 'postgres');
    assert.equal(parsed.port, '5432');
  });

  it('never echoes a DATABASE_URL it cannot read', () => {
    for (const url of ['gitops hunter2 db', 'gitops:hunter2@db', 'mysql://u:hunter2@db/x']) {
      assert.throws(
        () => sessionDatabaseUrl(url, { host: 'postgres', port: 5432 }),
        (error: Error) =>
          !error.message.includes('hunter2') && /DATABASE_URL is not a postgres:\/\/ URL/.test(error.message),
      );
    }
  });
});
