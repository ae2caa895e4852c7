/**
 * `kubectl gitops reseal` against a real PostgreSQL: values sealed under key A, the CLI configured with "B
 * (active), A", every value is under B afterwards with the same plaintext; a second run reseals nothing; a
 * value under a key the CLI does not have is reported by row id and key id and left alone; no secret is printed.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  createSealer,
  type Db,
  insertExternalEnvironment,
  listSealedValues,
  SEALED_COLUMNS,
  SealContext,
  type SealingKey,
  sealedColumnName,
} from '@gitops/db';
import {
  createTestDatabase,
  givenClusterUser,
  givenEngineInstance,
  givenRepositoryCredentials,
  type TestDatabase,
} from '@gitops/db/testing';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type CliRun, described, runCli } from './testing/run-cli.ts';

let testDb: TestDatabase;
let db: Db;
const keyA: SealingKey = { id: 'key-a', key: randomBytes(32) };
const keyB: SealingKey = { id: 'key-b', key: randomBytes(32) };
const keyC: SealingKey = { id: 'key-c', key: randomBytes(32) };
const b64 = (k: SealingKey) => Buffer.from(k.key).toString('base64');
const keysBThenA = `${keyB.id}=${b64(keyB)},${keyA.id}=${b64(keyA)}`;
const underA = createSealer({ keys: [keyA], activeKeyId: keyA.id });
const underC = createSealer({ keys: [keyC], activeKeyId: keyC.id });
const underBOrA = createSealer({ keys: [keyB, keyA], activeKeyId: keyB.id });

/** Every plaintext this test stored: none may appear in any output. */
const plaintexts: string[] = [];
const secret = (what: string) => {
  const value = `${what}-${randomBytes(12).toString('hex')}`;
  plaintexts.push(value);
  return value;
};

/** column name → row id → plaintext, of every value stored. */
const stored = new Map<string, Map<string, string>>();
const remember = (column: string, id: string, plaintext: string) => {
  if (!stored.has(column)) stored.set(column, new Map());
  stored.get(column)!.set(id, plaintext);
};

beforeAll(async () => {
  testDb = await createTestDatabase();
  db = testDb.db;
  const instance = await givenEngineInstance(db, `reseal-${randomUUID().slice(0, 8)}`);
  const tenant = await givenClusterUser(db);
  for (let i = 0; i < 5; i++) {
    const username = secret('user');
    const password = secret('password');
    const sshKey = i % 2 === 0 ? secret('ssh-key') : undefined;
    const row = await givenRepositoryCredentials(
      db,
      { clusterUserId: tenant.id, engineInstanceId: instance.id },
      { url: `https://git.example/r${i}.git`, secretName: `s${i}` },
      { sealer: underA, username, password, sshPrivateKey: sshKey },
    );
    remember('repository_credentials.username_sealed', row.id, username);
    remember('repository_credentials.password_sealed', row.id, password);
    if (sshKey) remember('repository_credentials.ssh_private_key_sealed', row.id, sshKey);
  }
  for (let i = 0; i < 3; i++) {
    const token = secret('token');
    const { credentials } = await db.transaction().execute((trx) =>
      insertExternalEnvironment(trx, {
        clusterUserId: tenant.id,
        name: `env-${i}`,
        credentials: {
          apiUrl: 'https://cluster.example:6443',
          bearerTokenSealed: underA.seal(token, SealContext.bearerToken),
          allowInsecureSkipTlsVerify: false,
          namespaces: [],
          clusterResources: false,
        },
      }),
    );
    remember('cluster_credentials.bearer_token_sealed', credentials.id, token);
  }
});
afterAll(async () => {
  await testDb?.destroy();
});

const env = (keys = keysBThenA) => ({ DATABASE_URL: testDb.url, GITOPS_ENCRYPTION_KEYS: keys });

interface Counts {
  column: string;
  resealed: number;
  current: number;
  changedMeanwhile: number;
  failed: { id: string; keyId: string | null; reason: string }[];
}
const countsOf = (run: CliRun): Map<string, Counts> =>
  new Map((JSON.parse(run.stdout) as { columns: Counts[] }).columns.map((c) => [c.column, c] as const));

function assertNoSecret(run: CliRun): void {
  const output = run.stdout + run.stderr;
  for (const value of [...plaintexts, b64(keyA), b64(keyB), b64(keyC)]) {
    assert.ok(!output.includes(value), `a secret was printed by: ${described(run)}`);
  }
}

/** Every stored value opens with `sealer` under `keyId`, to the plaintext it was stored with. */
async function assertEverything(keyId: string): Promise<void> {
  for (const column of SEALED_COLUMNS) {
    const name = sealedColumnName(column);
    const values = await listSealedValues(db, column, { limit: 1000 });
    const expected = stored.get(name) ?? new Map();
    assert.equal(values.length, expected.size, name);
    for (const { id, value } of values) {
      assert.equal(underBOrA.keyIdOf(value), keyId, `${name} row ${id}`);
      assert.equal(underBOrA.openString(value, column.context), expected.get(id), `${name} row ${id}`);
    }
  }
}

describe('kubectl gitops reseal', () => {
  test('a dry run counts what it would reseal and writes nothing', async () => {
    const run = await runCli(['reseal', '--dry-run', '-o', 'json'], env());
    assert.equal(run.code, 0, described(run));
    assertNoSecret(run);
    assert.equal(countsOf(run).get('repository_credentials.username_sealed')?.resealed, 5);
    await assertEverything(keyA.id);
  });

  test('re-seals every value under the active key B, plaintext unchanged; a second run reseals nothing', async () => {
    const first = await runCli(['reseal', '--batch', '2'], env());
    assert.equal(first.code, 0, described(first));
    assertNoSecret(first);
    assert.match(first.stdout, /resealed under the active key 'key-b'/);
    assert.match(first.stdout, /repository_credentials\.username_sealed\s+5\s+0\s+0\s+0/);
    assert.match(first.stdout, /repository_credentials\.ssh_private_key_sealed\s+3\s+0\s+0\s+0/);
    assert.match(first.stdout, /cluster_credentials\.bearer_token_sealed\s+3\s+0\s+0\s+0/);
    await assertEverything(keyB.id);

    const again = await runCli(['reseal', '-o', 'json'], env());
    assert.equal(again.code, 0, described(again));
    assertNoSecret(again);
    for (const counts of countsOf(again).values()) {
      assert.equal(counts.resealed, 0, counts.column);
      assert.equal(counts.failed.length, 0, counts.column);
      assert.equal(counts.current, stored.get(counts.column)?.size ?? 0, counts.column);
    }
    await assertEverything(keyB.id);
  });

  test('a value under a key that is not configured is reported by row id and key id, and left alone', async () => {
    const [row] = await listSealedValues(db, SEALED_COLUMNS.find((c) => c.column === 'password_sealed')!, {
      limit: 1,
    });
    const lost = secret('password-under-c');
    await db
      .updateTable('repository_credentials')
      .set({ password_sealed: underC.seal(lost, SealContext.password) })
      .where('id', '=', row!.id)
      .execute();

    const run = await runCli(['reseal'], env());
    assert.equal(run.code, 1, described(run));
    assertNoSecret(run);
    assert.match(
      run.stdout,
      new RegExp(
        `FAILED repository_credentials\\.password_sealed row ${row!.id}: sealed under key 'key-c': that key is not in GITOPS_ENCRYPTION_KEYS`,
      ),
    );
    const json = countsOf(await runCli(['reseal', '-o', 'json'], env()));
    assert.deepEqual(json.get('repository_credentials.password_sealed')?.failed, [
      { id: row!.id, keyId: 'key-c', reason: 'UNKNOWN_KEY' },
    ]);
    const [after] = await listSealedValues(db, SEALED_COLUMNS.find((c) => c.column === 'password_sealed')!, {
      limit: 1,
    });
    assert.equal(underC.openString(after!.value, SealContext.password), lost);
  });

  test('without GITOPS_ENCRYPTION_KEYS or DATABASE_URL it says what is missing in one line, exit code 2', async () => {
    const noKeys = await runCli(['reseal'], { DATABASE_URL: testDb.url });
    assert.equal(noKeys.code, 2, described(noKeys));
    assert.equal(noKeys.stdout, '');
    assert.match(noKeys.stderr, /^kubectl gitops reseal: GITOPS_ENCRYPTION_KEYS is not set: .*\n$/);
    const badKeys = await runCli(['reseal'], { DATABASE_URL: testDb.url, GITOPS_ENCRYPTION_KEYS: 'k=short' });
    assert.equal(badKeys.code, 2, described(badKeys));
    assert.match(
      badKeys.stderr,
      /^kubectl gitops reseal: GITOPS_ENCRYPTION_KEYS key "k" must be 32 bytes, base64 encoded \(got a value, not shown\)\n$/,
    );
    const noDb = await runCli(['reseal'], { GITOPS_ENCRYPTION_KEYS: keysBThenA });
    assert.equal(noDb.code, 2, described(noDb));
    assert.match(noDb.stderr, /^kubectl gitops reseal: DATABASE_URL is not set: .*\n$/);
    assertNoSecret(noKeys);
    assertNoSecret(noDb);
  });
});
