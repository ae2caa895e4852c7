import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import {
  desiredApplicationSpec,
  destinationProblem,
  INVALID_DESTINATION_NAMESPACE,
  parseGitOpsDeploymentSpec,
} from './desired-application.ts';

const source = { repoURL: 'https://github.com/org/repo', path: 'env/dev' };

function desired(spec: unknown, namespace = 'jane') {
  const parsed = parseGitOpsDeploymentSpec(spec);
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.problem);
  return desiredApplicationSpec(parsed.spec, namespace);
}

describe('desired Argo CD Application spec of a GitOpsDeployment', () => {
  test('automated: automated policy, background prune propagation first, user options after, unlimited retry', () => {
    assert.deepEqual(
      desired({
        source: { ...source, targetRevision: 'main' },
        type: 'automated',
        syncPolicy: { syncOptions: ['CreateNamespace=true'] },
      }),
      {
        source: { ...source, targetRevision: 'main' },
        destination: { namespace: 'jane' },
        syncPolicy: {
          automated: { prune: true, selfHeal: true, allowEmpty: true },
          syncOptions: ['PrunePropagationPolicy=background', 'CreateNamespace=true'],
          retry: { limit: -1, backoff: { duration: '5s', factor: 2, maxDuration: '3m' } },
        },
      },
    );
  });

  test('manual without sync options has no syncPolicy at all', () => {
    assert.deepEqual(desired({ source, type: 'manual' }), {
      source: { ...source, targetRevision: '' },
      destination: { namespace: 'jane' },
    });
  });

  test('manual with sync options has only the user options', () => {
    assert.deepEqual(
      desired({ source, type: 'manual', syncPolicy: { syncOptions: ['CreateNamespace=false'] } }).syncPolicy,
      {
        syncOptions: ['CreateNamespace=false'],
      },
    );
  });

  test("Argo CD's controls: the automated policy's switches (a false one left out, as Argo CD writes it), the user's retry and propagation policy", () => {
    assert.deepEqual(
      desired({
        source,
        type: 'automated',
        syncPolicy: {
          automated: { prune: false, selfHeal: true },
          retry: { limit: 3, backoff: { duration: '10s', factor: 3 } },
          syncOptions: ['PrunePropagationPolicy=foreground', 'ServerSideApply=true'],
        },
      }).syncPolicy,
      {
        automated: { selfHeal: true, allowEmpty: true },
        syncOptions: ['PrunePropagationPolicy=foreground', 'ServerSideApply=true'],
        retry: { limit: 3, backoff: { duration: '10s', factor: 3 } },
      },
    );
    // Every switch off: still automated (an empty policy), not manual.
    assert.deepEqual(
      desired({
        source,
        type: 'automated',
        syncPolicy: { automated: { prune: false, selfHeal: false, allowEmpty: false } },
      }).syncPolicy,
      {
        automated: {},
        syncOptions: ['PrunePropagationPolicy=background'],
        retry: { limit: -1, backoff: { duration: '5s', factor: 2, maxDuration: '3m' } },
      },
    );
    assert.deepEqual(desired({ source, type: 'manual', syncPolicy: { retry: { limit: 2 } } }).syncPolicy, {
      retry: { limit: 2 },
    });
  });

  test('Helm, Kustomize and directory options in Argo CD shape, empty values left out but the user values kept as written', () => {
    const helm = desired({
      source: {
        ...source,
        helm: {
          valueFiles: ['values-prod.yaml'],
          values: '',
          valuesObject: { debug: false, replicas: 0, name: '' },
          parameters: [
            { name: 'image.tag', value: 'v2', forceString: false },
            { name: 'port', value: '8080', forceString: true },
          ],
          skipCrds: false,
        },
      },
      type: 'manual',
    }).source;
    assert.deepEqual(helm, {
      ...source,
      targetRevision: '',
      helm: {
        valueFiles: ['values-prod.yaml'],
        valuesObject: { debug: false, replicas: 0, name: '' },
        parameters: [
          { name: 'image.tag', value: 'v2' },
          { name: 'port', value: '8080', forceString: true },
        ],
      },
    });
    const kustomize = desired({
      source: {
        ...source,
        kustomize: {
          images: ['registry.example/app:v2'],
          namePrefix: '',
          commonLabels: { team: 'payments', empty: '' },
          patches: [{ patch: 'x', target: { kind: 'Deployment', name: '' } }],
          namespace: 'jane',
        },
      },
      type: 'manual',
    }).source as { kustomize: unknown };
    assert.deepEqual(kustomize.kustomize, {
      images: ['registry.example/app:v2'],
      commonLabels: { team: 'payments', empty: '' },
      patches: [{ patch: 'x', target: { kind: 'Deployment' } }],
      namespace: 'jane',
    });
    assert.deepEqual(
      (
        desired({
          source: { ...source, directory: { recurse: true, include: '*.yaml', exclude: '' } },
          type: 'manual',
        }).source as { directory: unknown }
      ).directory,
      { recurse: true, include: '*.yaml' },
    );
    // Nothing set in them: no section at all.
    assert.equal(
      (
        desired({ source: { ...source, directory: { recurse: false } }, type: 'manual' }).source as {
          directory?: unknown;
        }
      ).directory,
      undefined,
    );
  });

  test('ignoreDifferences and revisionHistoryLimit at the top, as in an Application', () => {
    const spec = desired({
      source,
      type: 'automated',
      ignoreDifferences: [{ group: 'apps', kind: 'Deployment', name: '', jsonPointers: ['/spec/replicas'] }],
      revisionHistoryLimit: 0,
    });
    assert.deepEqual(spec.ignoreDifferences, [
      { group: 'apps', kind: 'Deployment', jsonPointers: ['/spec/replicas'] },
    ]);
    assert.equal(spec.revisionHistoryLimit, 0);
  });

  test('a Kustomize namespace other than the destination namespace is refused, naming both; the same one is fine', () => {
    const parsed = parseGitOpsDeploymentSpec({
      source: { ...source, kustomize: { namespace: 'other' } },
      type: 'automated',
    });
    assert.ok(parsed.ok);
    assert.equal(
      destinationProblem(parsed.spec, 'jane'),
      'spec.source.kustomize.namespace must be the destination namespace jane (or empty), not other',
    );
    assert.equal(destinationProblem(parsed.spec, 'other'), undefined);
  });

  test('a NUL anywhere in the spec (PostgreSQL cannot store it) is reported with its path, in values and in keys', () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ source: { ...source, helm: { values: 'a: b\u0000' } } }, 'spec.source.helm.values'],
      [
        { source: { ...source, helm: { valuesObject: { deep: [{ x: 'ok' }, { y: '\u0000' }] } } } },
        'spec.source.helm.valuesObject.deep[1].y',
      ],
      [
        { source: { ...source, helm: { valuesObject: { 'k\u0000': 1 } } } },
        'spec.source.helm.valuesObject.k\\0',
      ],
      [
        { sources: [source, { ...source, helm: { parameters: [{ name: 'p', value: '\u0000' }] } }] },
        'spec.sources[1].helm.parameters[0].value',
      ],
    ];
    for (const [spec, path] of cases) {
      const parsed = parseGitOpsDeploymentSpec({ ...spec, type: 'automated' });
      assert.equal(parsed.ok, false, path);
      if (!parsed.ok) assert.equal(parsed.problem, `${path}: must not contain the NUL character`);
    }
  });

  test('Helm values over 64 KiB as an object, or two of helm, kustomize and directory, are reported', () => {
    const big = parseGitOpsDeploymentSpec({
      source: { ...source, helm: { valuesObject: { blob: 'x'.repeat(70_000) } } },
      type: 'automated',
    });
    assert.equal(big.ok, false);
    if (!big.ok) assert.match(big.problem, /^spec\.source\.helm\.valuesObject: must be at most 65536 bytes/);
    const two = parseGitOpsDeploymentSpec({
      source: { ...source, helm: {}, directory: {} },
      type: 'automated',
    });
    assert.equal(two.ok, false);
    if (!two.ok) assert.match(two.problem, /^spec\.source: set at most one of helm, kustomize and directory/);
  });

  test("a chart of a Helm repository: chart instead of path, the version as targetRevision, in Argo CD's shape", () => {
    const chart = { repoURL: 'https://charts.example.com', chart: 'web', targetRevision: '1.2.0' };
    assert.deepEqual(desired({ source: { ...chart, helm: { releaseName: 'shop' } }, type: 'manual' }), {
      source: { ...chart, helm: { releaseName: 'shop' } },
      destination: { namespace: 'jane' },
    });
    const oci = { repoURL: 'oci://registry.example.com/charts/web', path: '.', targetRevision: '1.2.0' };
    assert.deepEqual(desired({ source: oci, type: 'manual' }).source, oci);
  });

  test("several sources: each in Argo CD's shape, in order, a ref kept; no spec.source", () => {
    const spec = desired({
      sources: [
        {
          repoURL: 'http://charts.example.com',
          chart: 'web',
          targetRevision: '1.2.0',
          helm: { valueFiles: ['$values/web/prod.yaml'] },
        },
        { repoURL: source.repoURL, ref: 'values' },
        { ...source, kustomize: { namePrefix: 'x-' } },
      ],
      type: 'manual',
    });
    assert.deepEqual(spec, {
      sources: [
        {
          repoURL: 'http://charts.example.com',
          chart: 'web',
          targetRevision: '1.2.0',
          helm: { valueFiles: ['$values/web/prod.yaml'] },
        },
        { repoURL: source.repoURL, targetRevision: '', ref: 'values' },
        { ...source, targetRevision: '', kustomize: { namePrefix: 'x-' } },
      ],
      destination: { namespace: 'jane' },
    });
  });

  test('a Kustomize namespace other than the destination is refused in any of the sources', () => {
    const parsed = parseGitOpsDeploymentSpec({
      sources: [source, { ...source, kustomize: { namespace: 'other' } }],
      type: 'automated',
    });
    assert.ok(parsed.ok);
    assert.equal(
      destinationProblem(parsed.spec, 'jane'),
      'spec.sources[1].kustomize.namespace must be the destination namespace jane (or empty), not other',
    );
  });

  test('a chart, a ref or sources that admission would refuse are reported (objects stored before the rules)', () => {
    const chart = { repoURL: 'https://charts.example.com', chart: 'web' };
    for (const [bad, problem] of [
      [{ source: { ...chart, path: 'web' } }, /^spec\.source: chart and path are exclusive/],
      [
        { source: { ...chart, repoURL: 'file:///srv/charts.git' } },
        /^spec\.source: a chart needs a Helm repository/,
      ],
      [{ source: { ...source, ref: 'values' } }, /^spec\.source: ref is only for one of spec\.sources/],
      [{ source, sources: [source] }, /^spec\.source: set exactly one of spec\.source and spec\.sources/],
      [{}, /^spec\.source: set exactly one of spec\.source and spec\.sources/],
      [{ sources: Array.from({ length: 9 }, () => source) }, /^spec\.sources: /],
      [
        { sources: [{ repoURL: source.repoURL }] },
        /^spec\.sources\.0: each of spec\.sources needs a path, a chart or a ref/,
      ],
      [
        {
          sources: [
            { ...source, ref: 'a' },
            { ...source, ref: 'a' },
          ],
        },
        /^spec\.sources: each ref of spec\.sources must be unique/,
      ],
      [{ sources: [{ ...chart, ref: 'values' }] }, /^spec\.sources\.0: ref and chart are exclusive/],
    ] as const) {
      const parsed = parseGitOpsDeploymentSpec({ ...bad, type: 'manual' });
      assert.equal(parsed.ok, false, JSON.stringify(bad));
      if (!parsed.ok) assert.match(parsed.problem, problem);
    }
  });

  test('never contains project or destination.name (the agent derives them)', () => {
    const spec = desired({ source, type: 'automated' }) as Record<string, Record<string, unknown>>;
    assert.equal(spec.project, undefined);
    assert.deepEqual(Object.keys(spec.destination ?? {}), ['namespace']);
  });

  test('malformed specs are reported, not thrown', () => {
    for (const bad of [
      undefined,
      {},
      { source, type: 'sometimes' },
      { source: { ...source, path: '/' }, type: 'manual' },
      { source: { repoURL: 'x' }, type: 'manual' },
      { source, type: 'manual', syncPolicy: { syncOptions: ['Prune=true'] } },
    ]) {
      const parsed = parseGitOpsDeploymentSpec(bad);
      assert.equal(parsed.ok, false, JSON.stringify(bad));
      if (!parsed.ok) assert.match(parsed.problem, /^spec/);
    }
  });

  test('a destination namespace that is no namespace name (an object stored before the admission rule) is reported with the original message', () => {
    assert.match(
      INVALID_DESTINATION_NAMESPACE,
      /^the namespace specified in the destination field is invalid: /,
    );
    for (const namespace of ['Jane', 'jane_1', '-jane', 'a.b', 'x'.repeat(64)]) {
      const parsed = parseGitOpsDeploymentSpec({
        source,
        type: 'manual',
        destination: { environment: 'env', namespace },
      });
      assert.deepEqual(parsed, {
        ok: false,
        problem: `spec.destination.namespace: ${INVALID_DESTINATION_NAMESPACE}`,
      });
    }
    for (const namespace of ['', 'jane', 'team-1', 'x'.repeat(63)]) {
      const spec = { source, type: 'manual', destination: { environment: 'env', namespace } };
      assert.equal(parseGitOpsDeploymentSpec(spec).ok, true, namespace);
    }
  });
});
