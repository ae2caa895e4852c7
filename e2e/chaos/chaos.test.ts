/**
 * The chaos tier (`pnpm test:chaos`): the whole system — the backend pair (two replicas of one shard), two
 * engine instances (each a real Argo CD with its agent), on a PostgreSQL and a control plane of this file's
 * own — under a churn of GitOpsDeployments (creates, spec changes, deletes; manual ones with SyncRuns; some
 * through ManagedEnvironments, some from a private repository with RepositoryCredentials; an App Studio
 * application promoted to two environments; tenants moved between the instances and back by their namespace
 * label) while faults are injected, each loop bounded in count and time:
 *
 * - SIGKILL of a backend replica or an agent every 5–30 s (the harness starts it again, as a kubelet would);
 * - an immediate PostgreSQL restart, and a period where the connections to PostgreSQL are cut and new ones
 *   hang (a TCP proxy between the services and PostgreSQL);
 * - a kube-apiserver restart and an Argo CD application-controller restart.
 *
 * Then, with the faults stopped, the invariants of invariants.ts must all hold within CONVERGE_SECONDS; no
 * process may have died by itself, and no error-level log line may appear other than the transient ones
 * listed in ALLOWED_ERRORS. The time to converge and the counts are printed as one JSON line (figures, never
 * asserted: these machines are noisy). CHAOS_SEED replays a run's plan and fault times; CHAOS_DEPLOYMENTS,
 * CHAOS_TENANTS and CHAOS_CHURN_SECONDS size it.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type ChurnPlan, planChurn } from './churn.ts';
import {
  type ChaosEnvironment,
  type ErrorLine,
  errorLines,
  type FaultRecord,
  faults,
  SERVICES,
  type Service,
  seededRandom,
  sleep,
  startChaosEnvironment,
} from './harness.ts';
import { checkInvariants, type Snapshot } from './invariants.ts';

const DEPLOYMENTS = Number(process.env.CHAOS_DEPLOYMENTS ?? 200);
const TENANTS = Number(process.env.CHAOS_TENANTS ?? 5);
const CHURN_SECONDS = Number(process.env.CHAOS_CHURN_SECONDS ?? 120);
/** How long the system has to converge once the faults stopped (a bound, not a figure). */
const CONVERGE_SECONDS = Number(process.env.CHAOS_CONVERGE_SECONDS ?? 300);
/** How long new connections to PostgreSQL hang. */
const PARTITION_MS = 10_000;
const SEED = Number(process.env.CHAOS_SEED ?? Math.floor(Math.random() * 1e9));

/**
 * Error-level lines that a fault may cause and that are not defects, each with why. A line is allowed when
 * its message and its error both match. (The services log what a retry resolves — a lost PostgreSQL session,
 * the API server restarting — below error level: packages/shared/src/errors.ts, isTransientError.)
 */
const ALLOWED_ERRORS: { msg: RegExp; err: RegExp; why: string }[] = [];

const say = (line: string) => process.stderr.write(`[chaos] ${line}\n`);

describe('chaos: the whole system under churn and faults', () => {
  let env: ChaosEnvironment;
  let plan: ChurnPlan | undefined;

  beforeAll(async () => {
    env = await startChaosEnvironment(say);
  });
  afterAll(async () => {
    await plan?.stop();
    await env?.stop();
  });

  it(`${DEPLOYMENTS} GitOpsDeployments churned through process kills, PostgreSQL, API server and Argo CD restarts all converge`, async () => {
    const random = seededRandom(SEED);
    const between = (a: number, b: number) => a + random() * (b - a);
    say(`seed ${SEED}: ${DEPLOYMENTS} deployments over ${TENANTS} tenants, churn ${CHURN_SECONDS} s`);
    plan = await planChurn(env, {
      deployments: DEPLOYMENTS,
      tenants: TENANTS,
      churnSeconds: CHURN_SECONDS,
      random,
      log: say,
    });
    const churn = plan;

    // The faults: a kill loop over the whole window, and one of each of the others at a drawn moment.
    const startedAt = Date.now();
    const endsAt = startedAt + CHURN_SECONDS * 1000;
    const timeline: FaultRecord[] = [];
    const inject = faults(env, startedAt, timeline);
    const kills = Object.fromEntries(SERVICES.map((s) => [s, 0])) as Record<Service, number>;
    // Every round of kills hits each service once, in a drawn order.
    const victims: Service[] = [];
    const killLoop = async () => {
      for (;;) {
        const wait = between(5_000, 30_000);
        if (Date.now() + wait > endsAt) return;
        await sleep(wait);
        if (victims.length === 0) victims.push(...[...SERVICES].sort(() => random() - 0.5));
        const victim = victims.shift() as Service;
        if (!env.system.isRunning(victim)) continue;
        await inject.kill(victim);
        kills[victim]++;
      }
    };
    const once = async (fraction: number, fault: () => Promise<void>) => {
      await sleep(startedAt + (fraction + between(-0.05, 0.05)) * CHURN_SECONDS * 1000 - Date.now());
      await fault();
    };
    const churnDone = churn.run(startedAt);
    await Promise.all([
      churnDone,
      killLoop(),
      once(0.2, inject.restartPostgres),
      once(0.45, () => inject.partitionPostgres(PARTITION_MS)),
      once(0.65, inject.restartApiServer),
      once(0.8, inject.restartArgoCdController),
    ]);
    const faultsStopped = Date.now();
    for (const f of timeline.sort((a, b) => a.at - b.at)) say(`t=${f.at}s ${f.fault} (${f.seconds} s)`);
    say(
      `churn and faults done after ${Math.round((faultsStopped - startedAt) / 1000)} s: ${JSON.stringify(churn.counts)}`,
    );

    // Converge: every invariant at once, within the bound.
    let last: Snapshot | undefined;
    let convergedAt: number | undefined;
    let lastReport = Date.now();
    while (Date.now() - faultsStopped < CONVERGE_SECONDS * 1000) {
      const retried = await churn.retryFailedSyncs().catch(() => 0);
      if (retried > 0)
        say(`${retried} manual deployment(s) whose sync Argo CD failed: SyncRun requested again`);
      last = await checkInvariants(env, churn).catch((error: unknown) => ({
        problems: [`the check itself failed: ${String(error)}`],
        live: -1,
        applications: -1,
      }));
      if (last.problems.length === 0) {
        convergedAt = Date.now();
        break;
      }
      if (Date.now() - lastReport > 30_000) {
        lastReport = Date.now();
        say(
          `${Math.round((Date.now() - faultsStopped) / 1000)} s after the faults: ${last.problems.length} problems, e.g. ${last.problems.slice(0, 3).join('; ')}`,
        );
      }
      await sleep(5_000);
    }

    const errors = errorLines(env.system.logs);
    const unexpected = errors.filter(
      (e) => !ALLOWED_ERRORS.some((a) => a.msg.test(e.msg) && a.err.test(e.err)),
    );
    const byMessage = (lines: ErrorLine[]) => {
      const counts: Record<string, number> = {};
      for (const e of lines) {
        const key = `${e.service}: ${e.msg}${e.err ? ` (${e.err.slice(0, 160)})` : ''}`;
        counts[key] = (counts[key] ?? 0) + 1;
      }
      return counts;
    };
    const figure = {
      figure: 'chaos',
      cores: cpus().length,
      seed: SEED,
      deployments: DEPLOYMENTS,
      tenants: TENANTS,
      churn_seconds: CHURN_SECONDS,
      faults_seconds: Math.round((faultsStopped - startedAt) / 100) / 10,
      converged: convergedAt !== undefined,
      converge_seconds:
        convergedAt === undefined ? null : Math.round((convergedAt - faultsStopped) / 100) / 10,
      ...churn.counts,
      live_deployments: last?.live,
      applications: last?.applications,
      kills,
      postgres_restarts: timeline.filter((f) => f.fault.startsWith('PostgreSQL immediate')).length,
      postgres_partitions: timeline.filter((f) => f.fault.startsWith('PostgreSQL connections')).length,
      api_server_restarts: timeline.filter((f) => f.fault.startsWith('kube-apiserver')).length,
      argocd_controller_restarts: timeline.filter((f) => f.fault.startsWith('argocd')).length,
      restarts: env.supervisor.restarts,
      crashes: env.system.crashes.length,
      proxy_connections: env.proxy.accepted,
      error_lines: byMessage(errors),
    };
    process.stdout.write(`${JSON.stringify(figure)}\n`);
    if (last?.problems.length || errors.length || env.system.crashes.length) {
      // Every process's output (Argo CD's too) and what the test did to each deployment a problem names.
      const file = join(tmpdir(), `chaos-${SEED}-${process.pid}.log`);
      const named = churn.deployments.filter((d) =>
        last?.problems.some(
          (p) =>
            p.includes(`/${d.name} `) ||
            p.includes(`/${d.name}:`) ||
            [d.uid, ...d.previousUids].some((uid) => uid && p.includes(uid)),
        ),
      );
      await writeFile(
        file,
        [
          ...named.map((d) => `[test] ${d.namespace}/${d.name} ${d.kind}: ${d.events.join(', ')}`),
          ...env.system.logs,
        ].join('\n'),
      );
      say(`logs and the history of the deployments with problems: ${file}`);
      for (const d of named)
        say(`${d.namespace}/${d.name} (${d.kind}, uid ${d.uid}): ${d.events.join(', ')}`);
    }

    assert.deepEqual(
      last?.problems.slice(0, 60) ?? ['never checked'],
      [],
      `not converged ${CONVERGE_SECONDS} s after the faults stopped (${last?.problems.length} problems; seed ${SEED})`,
    );
    // No process died by itself: every exit was a kill of the test.
    assert.deepEqual(env.system.crashes, [], crashReport(env.system.logs));
    assert.deepEqual(byMessage(unexpected), {}, 'error-level log lines outside ALLOWED_ERRORS');
  });
});

/** The last lines each service printed that are not its JSON log (an uncaught exception's stack). */
function crashReport(logs: readonly string[]): string {
  const raw = logs.filter((l) => /^\[(backend|backend-2|cluster-agent|cluster-agent-b)\] (?!\{)/.test(l));
  return `a service exited by itself; its output that is not a log line:\n${raw.slice(-40).join('\n')}`;
}
