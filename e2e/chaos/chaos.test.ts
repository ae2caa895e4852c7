/**
 * The chaos tier (`pnpm test:chaos`): the whole system — the backend pair (two replicas of one shard), two
 * engine instances (each a real Argo CD with its agent), on a PostgreSQL and a control plane of this file's
 * own — under a churn of GitOpsDeployments (creates, spec changes, deletes; manual ones with SyncRuns; some
 * through ManagedEnvironments, some from a private repository with RepositoryCredentials; an App Studio
 * application promoted to two environments; tenants moved between the instances and back by their namespace
 * label) while faults are injected, each loop bounded in count and time:
 *
 * - SIGKILL of a backend replica or an agent every 5–30 s (the harness starts it again, as a kubelet would);
 * - once each, in a drawn order at drawn moments: an immediate PostgreSQL restart; every connection to
 *   PostgreSQL cut and new ones hanging; an agent cut from the API server while PostgreSQL answers, and an
 *   agent cut from PostgreSQL while the API server answers; a few hundred ms of latency on PostgreSQL, and on
 *   the API server; the Git server hanging; a kube-apiserver restart; an Argo CD application-controller
 *   restart (the network faults through a TCP proxy between each process and each server: harness.ts).
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
import { judge, type Sample, type SoakVerdict, sample } from './soak.ts';

const DEPLOYMENTS = Number(process.env.CHAOS_DEPLOYMENTS ?? 200);
const TENANTS = Number(process.env.CHAOS_TENANTS ?? 5);
const CHURN_SECONDS = Number(process.env.CHAOS_CHURN_SECONDS ?? 120);
/** How long the system has to converge once the faults stopped (a bound, not a figure). */
const CONVERGE_SECONDS = Number(process.env.CHAOS_CONVERGE_SECONDS ?? 300);
/** How long new connections to PostgreSQL hang. */
const PARTITION_MS = 10_000;
/** How long a network fault (an agent cut off, a latency, a hanging Git server) lasts. */
const NETWORK_FAULT_MS = 15_000;
/** The latency added on PostgreSQL or the API server, each way. */
const LATENCY_MS = 300;
const SEED = Number(process.env.CHAOS_SEED ?? Math.floor(Math.random() * 1e9));
/**
 * CHAOS_SOAK_MINUTES: after the chaos run converged, this many minutes of steady churn (1 % of the deployments
 * changed per minute) with a network fault every {@link SOAK_FAULT_EVERY_MINUTES} minutes, sampling memory,
 * connections and queues every minute (soak.ts); then every invariant again. 0 (the default): no soak.
 */
const SOAK_MINUTES = Number(process.env.CHAOS_SOAK_MINUTES ?? 0);
const SOAK_FAULT_EVERY_MINUTES = 3;
/** The chaos run, then the soak and its convergence. */
const TEST_TIMEOUT_MS =
  Math.max(1_200_000, (CHURN_SECONDS + CONVERGE_SECONDS + 300) * 1000) +
  (SOAK_MINUTES > 0 ? (SOAK_MINUTES * 60 + CONVERGE_SECONDS + 120) * 1000 : 0);

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

  it(
    `${DEPLOYMENTS} GitOpsDeployments churned through process kills, restarts and network faults all converge`,
    async () => {
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
      // The one-off faults, in a drawn order, one in each slot of the window (at a drawn moment within it).
      const agents = SERVICES.filter((s) => s.startsWith('cluster-agent'));
      const anAgent = () => agents[Math.floor(random() * agents.length)] as Service;
      const [cutFromApiServer, cutFromPostgres] = [anAgent(), anAgent()];
      const oneOff: (() => Promise<void>)[] = [
        inject.restartPostgres,
        () => inject.partitionPostgres(PARTITION_MS),
        inject.restartApiServer,
        inject.restartArgoCdController,
        () => inject.cutFromApiServer(cutFromApiServer, NETWORK_FAULT_MS),
        () => inject.cutFromPostgres(cutFromPostgres, NETWORK_FAULT_MS),
        () => inject.postgresLatency(LATENCY_MS, NETWORK_FAULT_MS),
        () => inject.apiServerLatency(LATENCY_MS, NETWORK_FAULT_MS),
        () => inject.hangGitServer(NETWORK_FAULT_MS),
      ].sort(() => random() - 0.5);
      const slot = 0.85 / oneOff.length;
      const atSlot = async (index: number, fault: () => Promise<void>) => {
        await sleep(
          startedAt + (0.05 + (index + between(0, 0.6)) * slot) * CHURN_SECONDS * 1000 - Date.now(),
        );
        await fault();
      };
      const churnDone = churn.run(startedAt);
      await Promise.all([churnDone, killLoop(), ...oneOff.map((fault, i) => atSlot(i, fault))]);
      const faultsStopped = Date.now();
      for (const f of timeline.sort((a, b) => a.at - b.at)) say(`t=${f.at}s ${f.fault} (${f.seconds} s)`);
      say(
        `churn and faults done after ${Math.round((faultsStopped - startedAt) / 1000)} s: ${JSON.stringify(churn.counts)}`,
      );

      // Converge: every invariant at once, within the bound.
      const converge = async (since: number) => {
        let snapshot: Snapshot | undefined;
        let lastReport = Date.now();
        while (Date.now() - since < CONVERGE_SECONDS * 1000) {
          const retried = await churn.retryFailedSyncs().catch(() => 0);
          if (retried > 0)
            say(`${retried} manual deployment(s) whose sync Argo CD failed: SyncRun requested again`);
          snapshot = await checkInvariants(env, churn).catch((error: unknown) => ({
            problems: [`the check itself failed: ${String(error)}`],
            live: -1,
            applications: -1,
          }));
          if (snapshot.problems.length === 0) return { last: snapshot, convergedAt: Date.now() };
          if (Date.now() - lastReport > 30_000) {
            lastReport = Date.now();
            say(
              `${Math.round((Date.now() - since) / 1000)} s after the faults: ${snapshot.problems.length} problems, e.g. ${snapshot.problems.slice(0, 3).join('; ')}`,
            );
          }
          await sleep(5_000);
        }
        return { last: snapshot, convergedAt: undefined };
      };
      let { last, convergedAt } = await converge(faultsStopped);
      /** The chaos run's own time to converge (the figure), whatever the soak does after it. */
      const chaosConvergedAt = convergedAt;

      // The soak (CHAOS_SOAK_MINUTES), once converged: steady churn and a network fault every few minutes, then
      // every invariant again.
      let soak:
        | { verdict: SoakVerdict; changed: number; faults: number; convergeSeconds: number | null }
        | undefined;
      if (SOAK_MINUTES > 0 && last?.problems.length === 0) {
        const soakFaults: (() => Promise<void>)[] = [
          () => inject.cutFromApiServer(anAgent(), NETWORK_FAULT_MS),
          () => inject.cutFromPostgres(anAgent(), NETWORK_FAULT_MS),
          () => inject.postgresLatency(LATENCY_MS, NETWORK_FAULT_MS),
          () => inject.apiServerLatency(LATENCY_MS, NETWORK_FAULT_MS),
          () => inject.hangGitServer(NETWORK_FAULT_MS),
          () => inject.partitionPostgres(PARTITION_MS),
        ].sort(() => random() - 0.5);
        const perMinute = Math.max(1, Math.round(DEPLOYMENTS * 0.01));
        say(
          `soak: ${SOAK_MINUTES} min, ${perMinute} deployment(s) changed per minute, a network fault every ${SOAK_FAULT_EVERY_MINUTES} min`,
        );
        const soakStarted = Date.now();
        const samples: Sample[] = [];
        const running: Promise<void>[] = [];
        let changed = 0;
        let played = 0;
        for (let minute = 0; minute <= SOAK_MINUTES; minute++) {
          await sleep(soakStarted + minute * 60_000 - Date.now());
          samples.push(await sample(env, minute));
          if (minute === SOAK_MINUTES) break;
          changed += await churn.changeSome(perMinute, soakStarted);
          if (minute % SOAK_FAULT_EVERY_MINUTES === 1 && minute < SOAK_MINUTES * 0.9) {
            running.push((soakFaults[played++ % soakFaults.length] as () => Promise<void>)());
          }
          if (minute % 10 === 0) say(`soak: minute ${minute}, ${changed} changes, ${played} faults`);
        }
        await Promise.all(running);
        const soakEnded = Date.now();
        const verdict = judge(samples);
        ({ last, convergedAt } = await converge(soakEnded));
        soak = {
          verdict,
          changed,
          faults: played,
          convergeSeconds:
            convergedAt === undefined ? null : Math.round((convergedAt - soakEnded) / 100) / 10,
        };
        for (const line of verdict.table) say(`soak: ${line}`);
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
          chaosConvergedAt === undefined ? null : Math.round((chaosConvergedAt - faultsStopped) / 100) / 10,
        ...churn.counts,
        live_deployments: last?.live,
        applications: last?.applications,
        kills,
        postgres_restarts: timeline.filter((f) => f.fault.startsWith('PostgreSQL immediate')).length,
        postgres_partitions: timeline.filter((f) => f.fault.startsWith('PostgreSQL connections')).length,
        api_server_restarts: timeline.filter((f) => f.fault.startsWith('kube-apiserver')).length,
        argocd_controller_restarts: timeline.filter((f) => f.fault.startsWith('argocd')).length,
        network_faults: timeline.filter((f) => /cut from|latency|Git server/.test(f.fault)).length,
        restarts: env.supervisor.restarts,
        crashes: env.system.crashes.length,
        proxy_connections: env.proxies.all.reduce((sum, p) => sum + p.accepted, 0),
        error_lines: byMessage(errors),
      };
      process.stdout.write(`${JSON.stringify(figure)}\n`);
      if (soak) {
        const { verdict, ...counts } = soak;
        process.stdout.write(
          `${JSON.stringify({ figure: 'soak', minutes: SOAK_MINUTES, seed: SEED, deployments: DEPLOYMENTS, ...counts, ...verdict.figures, problems: verdict.problems })}\n`,
        );
      }
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
      if (SOAK_MINUTES > 0) {
        assert.ok(soak, 'the soak did not run: the system had not converged before it');
        assert.deepEqual(soak.verdict.problems, [], 'the soak: memory, connections or a queue grew');
      }
    },
    TEST_TIMEOUT_MS,
  );
});

/** The last lines each service printed that are not its JSON log (an uncaught exception's stack). */
function crashReport(logs: readonly string[]): string {
  const raw = logs.filter((l) => /^\[(backend|backend-2|cluster-agent|cluster-agent-b)\] (?!\{)/.test(l));
  return `a service exited by itself; its output that is not a log line:\n${raw.slice(-40).join('\n')}`;
}
