import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { useTestDatabase } from '@gitops/db/testing';
import { freePort, startProcess, waitFor } from '@gitops/local-env';
import { loadKubeConfig } from '@gitops/shared';
import { randomSuffix, useNamespace } from '@gitops/shared/testing';
import { test } from 'vitest';

const mainPath = fileURLToPath(new URL('./main.ts', import.meta.url));
const kc = loadKubeConfig(process.env.KUBECONFIG);
const database = useTestDatabase();
const argoCdNamespace = `argocd-main-${randomSuffix()}`;
useNamespace(kc, argoCdNamespace);

const baseEnv = (port: number) => ({
  ...process.env,
  DATABASE_URL: database.url,
  ARGOCD_NAMESPACE: argoCdNamespace,
  ENGINE_INSTANCE_NAME: `main-${randomSuffix()}`,
  GITOPS_ENCRYPTION_KEYS: `k1=${randomBytes(32).toString('base64')}`,
  // Match nothing of other test files: this process only proves the wiring.
  GITOPS_BACKEND_SHARD: `main-${randomSuffix()}`,
  HTTP_PORT: String(port),
  LOG_LEVEL: 'info',
});

test('the backend process answers /healthz, /readyz and /metrics, logs no secrets, and exits 0 on SIGTERM', async () => {
  const port = await freePort();
  const env = baseEnv(port);
  const lines: string[] = [];
  // A heap bound as a Pod's memory limit gives one: a runaway ends this process with V8's heap message in its
  // output (and a heap snapshot in the temp folder) instead of the machine's OOM killer taking it (and
  // stalling every other test) with no trace.
  const child = startProcess(
    'backend',
    process.execPath,
    [
      '--max-old-space-size=768',
      '--heapsnapshot-near-heap-limit=1',
      `--diagnostic-dir=${tmpdir()}`,
      mainPath,
    ],
    {
      env,
      onLine: (l) => lines.push(l),
    },
  );
  try {
    await waitFor(
      '/readyz',
      async () =>
        (await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(10_000) })).ok,
      {
        process: child,
        timeoutMs: 60_000,
      },
    );
    assert.equal(
      (await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(10_000) })).status,
      200,
    );
    const metrics = await (
      await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(10_000) })
    ).text();
    assert.match(metrics, /controller_runtime_reconcile_total\{[^}]*controller="gitopsdeployment"/);
    assert.match(metrics, /gitops_relay_operation_crs_total/);
  } finally {
    child.child.kill('SIGTERM');
  }
  const code = await child.exited;
  await child.closed; // every line it wrote has been read
  // In loaded full runs this process sometimes did not exit 0: an HTTP/2 reset loop in Node at shutdown grew it
  // to 20 GB (the kube transport speaks HTTP/1.1 since, packages/shared/src/kube.ts). Should it come back,
  // the failure says how it ended and what it logged last.
  assert.equal(
    code,
    0,
    `exit ${code} (signal ${child.child.signalCode}); ${lines.length} lines, the last:\n${lines.slice(-30).join('\n')}`,
  );
  const output = lines.join('\n');
  assert.ok(lines.some((l) => l.includes('backend ready')));
  const password = new URL(database.url).password;
  if (password) assert.ok(!output.includes(password), 'the database password is never logged');
  assert.ok(!output.includes(env.GITOPS_ENCRYPTION_KEYS.slice(3)), 'the encryption key is never logged');
});

test('a missing Argo CD namespace is reported clearly and the process exits non-zero', async () => {
  const port = await freePort();
  const lines: string[] = [];
  const child = startProcess('backend', process.execPath, [mainPath], {
    env: { ...baseEnv(port), ARGOCD_NAMESPACE: `missing-${randomSuffix()}` },
    onLine: (l) => lines.push(l),
  });
  assert.equal(await child.exited, 1);
  await child.closed; // every line it wrote has been read
  assert.ok(
    lines.some((l) => l.includes('does not exist')),
    lines.join('\n'),
  );
});

test('invalid configuration lists every bad variable and exits 1', async () => {
  const lines: string[] = [];
  const child = startProcess('backend', process.execPath, [mainPath], {
    env: {
      ...process.env,
      DATABASE_URL: 'mysql://x',
      GITOPS_ENCRYPTION_KEYS: 'short=abc',
      RESYNC_INTERVAL: '5',
    },
    onLine: (l) => lines.push(l),
  });
  assert.equal(await child.exited, 1);
  await child.closed; // every line it wrote has been read
  const output = lines.join('\n');
  assert.match(output, /DATABASE_URL/);
  assert.match(output, /GITOPS_ENCRYPTION_KEYS/);
  assert.match(output, /RESYNC_INTERVAL/);
  assert.ok(!output.includes('mysql://x'), 'secret values are not echoed');
});
