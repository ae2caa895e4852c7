/**
 * Versions (docs/upgrades.md): every process says which build it runs, on `GET /version`, in the
 * `gitops_build_info` metric and in its first log line; the version is the root package.json's, the one
 * CHANGELOG.md's newest entry and the manifests' image tag name.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { freePort, repoRoot } from '@gitops/local-env';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type ServiceName, type System, startSystem } from '../fixture/system.ts';

const REVISION = 'e2e0123456789';

describe('versions', () => {
  let system: System;
  let version: string;
  const ports = new Map<ServiceName, number>();

  beforeAll(async () => {
    version = (JSON.parse(await readFile(join(repoRoot, 'package.json'), 'utf8')) as { version: string })
      .version;
    system = await startSystem({ start: [] });
    for (const name of ['backend', 'cluster-agent'] as const) {
      const port = await freePort();
      ports.set(name, port);
      // What the image sets from its build argument (Dockerfile).
      await system.start(name, { HTTP_PORT: String(port), GITOPS_REVISION: REVISION });
    }
  });
  afterAll(async () => {
    await system?.stop();
  });

  it('the backend and the cluster-agent answer /version, export gitops_build_info and log their build first', async () => {
    for (const [name, port] of ports) {
      const answer = await (await fetch(`http://127.0.0.1:${port}/version`)).json();
      assert.deepEqual(answer, { component: name, version, revision: REVISION });
      const metrics = await system.metrics(name);
      const series = metrics.split('\n').find((line) => line.startsWith('gitops_build_info{'));
      assert.ok(series, `${name} exports gitops_build_info`);
      assert.match(series, new RegExp(`version="${version.replaceAll('.', '\\.')}"`));
      assert.match(series, new RegExp(`revision="${REVISION}"`));
      assert.match(series, new RegExp(`component="${name}"`));
      assert.match(series, / 1$/);
      // The process's first JSON log line (Node itself may print warnings before it).
      const first = system.logs
        .filter((line) => line.startsWith(`[${name}] {`))
        .map((line) => JSON.parse(line.slice(name.length + 3)) as Record<string, unknown>)[0];
      assert.equal(first?.msg, `${name} ${version} (${REVISION}) starting`);
      assert.equal(first?.version, version);
      assert.equal(first?.revision, REVISION);
    }
  });

  it("the version is semantic, CHANGELOG.md's newest entry, and the tag of the manifests' images", async () => {
    assert.match(version, /^\d+\.\d+\.\d+$/);
    const changelog = await readFile(join(repoRoot, 'CHANGELOG.md'), 'utf8');
    const newest = /^## (\S+)/m.exec(changelog)?.[1];
    assert.equal(newest, version, 'CHANGELOG.md starts with the current version');
    for (const file of [
      'manifests/base/deployments.yaml',
      'manifests/components/rhoas-operator/deployment.yaml',
    ]) {
      const images = [...(await readFile(join(repoRoot, file), 'utf8')).matchAll(/image: (\S+)/g)].map(
        (m) => m[1],
      );
      assert.ok(images.length > 0, `${file} names an image`);
      for (const image of images) assert.equal(image, `gitops-service:${version}`, file);
    }
  });
});
