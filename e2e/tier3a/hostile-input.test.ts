/**
 * Tier 3a: generated hostile input for every kind (issue 15, item 5), against the real API server with the
 * backend (App Studio included), the cluster-agent and the RHOAS operator running as separate processes.
 *
 * The cases come from the table in ../fixture/hostile-input.ts (a row per kind): wrong types, control
 * characters (NUL, ESC, DEL, line breaks), strings over the limit and of 300 000 characters, lists over the
 * limit, Unicode (RTL override, emoji, combining and zero-width characters), malformed URLs, unknown fields,
 * and Secrets holding binary data or control characters with a planted value inside. Each object is either
 * rejected at admission with a message naming the field, or admitted and then reported by its controller
 * with a specific condition (never "an unknown error occurred") or handled without complaint. Afterwards:
 * no process crashed, the processes are not stuck in a retry loop (reconciles and operations counted over a
 * window stay within a bound a hot loop would break), no condition anywhere is the unknown error, and no
 * planted value is in any process's log, any Event, any status or any operation message.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { type CloudServicesApi, startCloudServicesApi } from '@gitops/local-env';
import { HttpMethod, KubeApiError, type KubeObject, kubeRequest } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  APPSTUDIO_APPLICATION,
  APPSTUDIO_GROUP_VERSION,
  casesOf,
  ENVIRONMENT_SECRET,
  HOSTILE_KINDS,
  type HostileCase,
  type HostileCondition,
  type HostileKind,
  type HostileObject,
  kubeconfig,
  ME_SECRET_TYPE,
  ME_SERVER,
  RHOAS_OFFLINE_TOKEN,
  RHOAS_TOKEN_SECRET,
  UNKNOWN_ERROR,
  type Verdict,
  withObjectName,
} from '../fixture/hostile-input.ts';
import { list } from '../fixture/kube.ts';
import { type PlayedSystem, startPlayedArgoCdSystem } from '../fixture/played-argo-cd.ts';
import type { ServiceName, System } from '../fixture/system.ts';

const BACKEND_SHARD_LABEL = 'managed-gitops.redhat.com/backend-shard';
const SERVICES: ServiceName[] = ['backend', 'cluster-agent', 'rhoas-operator'];
/** How long the processes are watched for a retry loop once every admitted object has its verdict. */
const QUIET_WINDOW_MS = 20_000;

const collection = (kind: HostileKind, namespace: string) =>
  `/apis/${kind.apiVersion}/namespaces/${namespace}/${kind.plural}`;

/** Every condition-like list of a status (core kinds, App Studio's binding lists, RHOAS). */
function conditionsOf(object: HostileObject): HostileCondition[] {
  const status = object.status ?? {};
  return ['conditions', 'bindingConditions', 'componentDeploymentConditions'].flatMap((key) =>
    Array.isArray(status[key]) ? (status[key] as HostileCondition[]) : [],
  );
}

/** The sum of a counter over all its label sets, from Prometheus text. */
function counterSum(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.split(' ').pop());
  }
  return sum;
}

describe('hostile input for every kind (tier 3a)', () => {
  let f: PlayedSystem;
  let system: System;
  let cloud: CloudServicesApi;
  let tenant: string;
  let rhoasNamespace: string;
  /** Values planted inside Secrets: none may ever show up outside the Secret. */
  const planted: string[] = [];
  const admitted: { case: HostileCase; name: string; namespace: string; verdict?: Verdict }[] = [];

  const homeOf = (kind: HostileKind) => (kind.home === 'rhoas' ? rhoasNamespace : tenant);

  async function createSecret(
    namespace: string,
    name: string,
    type: string | undefined,
    data: Record<string, Buffer>,
  ) {
    await kubeRequest(system.kc, {
      method: HttpMethod.POST,
      path: `/api/v1/namespaces/${namespace}/secrets`,
      body: {
        metadata: { name },
        ...(type ? { type } : {}),
        data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, v.toString('base64')])),
      },
    });
  }

  beforeAll(async () => {
    cloud = await startCloudServicesApi();
    f = await startPlayedArgoCdSystem({ start: [] });
    system = f.system;
    tenant = await f.given.tenant('hostile');
    rhoasNamespace = await f.given.tenant('hostile-rhoas');
    await system.start('backend');
    await system.start('cluster-agent');
    await system.start('rhoas-operator', {
      CLOUD_SERVICES_API: cloud.url,
      CLOUD_SERVICES_SSO: cloud.ssoUrl,
      MAS_AUTH_URL: `${cloud.url}/auth`,
      MAS_AUTH_REALM: 'rhoas',
      RHOAS_WATCH_NAMESPACE: rhoasNamespace,
    });
    await kubeRequest(system.kc, {
      method: HttpMethod.POST,
      path: `/apis/${APPSTUDIO_GROUP_VERSION}/namespaces/${tenant}/applications`,
      body: {
        apiVersion: APPSTUDIO_GROUP_VERSION,
        kind: 'Application',
        metadata: { name: APPSTUDIO_APPLICATION, labels: { [BACKEND_SHARD_LABEL]: system.shard } },
        spec: { displayName: 'Hostile input' },
      },
    });
    await createSecret(tenant, ENVIRONMENT_SECRET, ME_SECRET_TYPE, {
      kubeconfig: Buffer.from(kubeconfig(ME_SERVER, 'not-planted-token')),
    });
    await createSecret(rhoasNamespace, RHOAS_TOKEN_SECRET, undefined, {
      value: Buffer.from(RHOAS_OFFLINE_TOKEN),
    });
    await createSecret(rhoasNamespace, 'sa-credentials', undefined, {
      'client-id': Buffer.from('srvc-acct-1'),
      'client-secret': Buffer.from('not-planted'),
    });
  });
  afterAll(async () => {
    await f?.stop();
    await cloud?.close();
  });

  for (const kind of HOSTILE_KINDS) {
    it(`${kind.kind}: every generated case is rejected naming the field, or handled with a specific verdict`, async () => {
      const namespace = homeOf(kind);
      const mine: typeof admitted = [];
      const cases = casesOf(kind);
      for (const [index, c] of cases.entries()) {
        for (const secret of c.secrets ?? []) {
          const value = `planted-${randomBytes(6).toString('hex')}`;
          planted.push(value);
          await createSecret(namespace, secret.name, secret.type, secret.data(value));
        }
        const name = `case-${index}`;
        const labels = kind.home === 'tenant' ? { [BACKEND_SHARD_LABEL]: system.shard } : {};
        try {
          await kubeRequest(system.kc, {
            method: HttpMethod.POST,
            path: collection(kind, namespace),
            body: {
              apiVersion: kind.apiVersion,
              kind: kind.kind,
              metadata: { name, labels },
              spec: withObjectName(c.spec, name),
            },
          });
        } catch (err) {
          if (!(err instanceof KubeApiError) || err.statusCode !== 422) throw err;
          assert.notEqual(c.expect, 'admitted', `${kind.kind} ${c.title}: rejected (${err.message})`);
          assert.ok(
            err.message.includes(c.field),
            `${kind.kind} ${c.title}: the message names ${c.field}: ${err.message.slice(0, 300)}`,
          );
          assert.ok(!err.message.includes(UNKNOWN_ERROR));
          continue;
        }
        assert.notEqual(c.expect, 'rejected', `${kind.kind} ${c.title}: admitted`);
        mine.push({ case: c, name, namespace });
      }
      for (const entry of mine) {
        const c = entry.case;
        entry.verdict = await eventually(
          `${kind.kind} ${c.title}: a verdict`,
          async () => {
            const object = (await kubeRequest(system.kc, {
              method: HttpMethod.GET,
              path: `${collection(kind, namespace)}/${entry.name}`,
            }).catch((err: unknown) => {
              // A controller that deletes the object (an App Studio binding without its Application) has handled it.
              if (err instanceof KubeApiError && err.statusCode === 404) return undefined;
              throw err;
            })) as HostileObject | undefined;
            if (!object) return { outcome: 'accepted' } as Verdict;
            return kind.verdict(object, { system });
          },
          120_000,
        );
        if (entry.verdict.outcome === 'reported') {
          const { reason, message } = entry.verdict;
          assert.notEqual(message, UNKNOWN_ERROR, `${kind.kind} ${c.title}: ${reason}`);
          assert.notEqual(reason, 'UnknownError', `${kind.kind} ${c.title}: ${message}`);
          if (c.reason) assert.match(reason, c.reason, `${kind.kind} ${c.title}: ${reason}: ${message}`);
        } else if (c.reason) {
          assert.fail(
            `${kind.kind} ${c.title}: expected a report matching ${c.reason}, the object was accepted`,
          );
        }
      }
      admitted.push(...mine);
      if (process.env.E2E_VERBOSE)
        for (const e of mine)
          process.stderr.write(`[hostile] ${kind.kind} ${e.case.title}: ${JSON.stringify(e.verdict)}\n`);
      assert.ok(cases.length > 10, `${kind.kind}: ${cases.length} cases generated`);
    });
  }

  it('no process crashed or was restarted', () => {
    assert.deepEqual(system.crashes, []);
    for (const name of SERVICES) assert.ok(system.isRunning(name), `${name} is running`);
  });

  it('no process is stuck retrying: reconciles and operations over a quiet window stay within a bound a hot loop breaks', async () => {
    const reconciles = async () => {
      let total = 0;
      for (const name of SERVICES) {
        const count = counterSum(await system.metrics(name), 'controller_runtime_reconcile_total');
        assert.ok(count > 0, `${name} reports its reconciles`);
        total += count;
      }
      return total;
    };
    const operations = async () =>
      Number(
        (
          await system.db
            .selectFrom('operation')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const before = { reconciles: await reconciles(), operations: await operations() };
    await new Promise((resolve) => setTimeout(resolve, QUIET_WINDOW_MS));
    const after = { reconciles: await reconciles(), operations: await operations() };
    // Failed objects are retried with backoff (at most a few times each in the window) and periodic
    // re-validation is minutes apart; a key requeued without backoff reconciles hundreds of times a second.
    const bound = 4 * admitted.length + 100;
    assert.ok(
      after.reconciles - before.reconciles <= bound,
      `${after.reconciles - before.reconciles} reconciles in the window (bound ${bound}, ${admitted.length} admitted objects)`,
    );
    assert.ok(
      after.operations - before.operations <= admitted.length,
      `${after.operations - before.operations} operations created in the window`,
    );
  });

  it('no condition of any object says "an unknown error occurred"', async () => {
    for (const kind of HOSTILE_KINDS) {
      for (const object of await list<HostileObject>(system.kc, collection(kind, homeOf(kind)))) {
        for (const c of conditionsOf(object)) {
          assert.notEqual(c.message, UNKNOWN_ERROR, `${kind.kind} ${object.metadata.name} ${c.type}`);
        }
      }
    }
  });

  it('no planted Secret value is in any log line, Event, status or operation message', async () => {
    assert.ok(planted.length > 0);
    const leaks = (text: string) => planted.filter((p) => text.includes(p));
    assert.ok(system.logs.length > 0);
    for (const line of system.logs) assert.deepEqual(leaks(line), [], `a log line: ${line.slice(0, 200)}`);
    for (const namespace of [tenant, rhoasNamespace]) {
      const events = await list<KubeObject & { message?: string }>(
        system.kc,
        `/api/v1/namespaces/${namespace}/events`,
      );
      for (const e of events) assert.deepEqual(leaks(e.message ?? ''), [], `an Event: ${e.message}`);
    }
    const kinds = [
      ...HOSTILE_KINDS.map((k) => collection(k, homeOf(k))),
      // ManagedEnvironments generated by Environments.
      `/apis/managed-gitops.redhat.com/v1alpha1/namespaces/${tenant}/gitopsdeploymentmanagedenvironments`,
    ];
    for (const path of kinds) {
      for (const object of await list<HostileObject>(system.kc, path)) {
        assert.deepEqual(leaks(JSON.stringify(object.status ?? {})), [], `${path}/${object.metadata.name}`);
      }
    }
    for (const op of await system.db.selectFrom('operation').select('message').execute())
      assert.deepEqual(leaks(op.message), []);
  });
});
