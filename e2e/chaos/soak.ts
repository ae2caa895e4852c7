/**
 * The soak's measurements (CHAOS_SOAK_MINUTES): every minute, the resident memory of every process of the
 * system (the services, each Argo CD's processes, kube-apiserver, etcd, PostgreSQL), the open connections of
 * each service (to PostgreSQL and to the API server, counted on its own proxies, and PostgreSQL's sessions per
 * role and application), and the depth of every queue (each service's `workqueue_depth`, the backends'
 * `gitops_operations` waiting and in progress). At the end, what must hold: memory and connections flat after
 * the warm-up (growth below {@link MAX_GROWTH}), no queue whose depth only grew.
 */
import { readdir, readFile } from 'node:fs/promises';
import { sql } from 'kysely';
import { ARGO_CDS, type ChaosEnvironment, SERVICES } from './harness.ts';

/** The growth allowed between the end of the warm-up and the end of the soak. */
export const MAX_GROWTH = 0.1;
/** Connections are counted in units: a count may also grow by this many (one more pooled session). */
const CONNECTION_SLACK = 1;

export interface Sample {
  /** Minutes since the soak started. */
  minute: number;
  /** Resident memory (VmRSS; PostgreSQL: RssAnon + RssFile of the postmaster and each of its children), MiB. */
  rss: Record<string, number>;
  /** Process ids, to tell a restart from growth. */
  pids: Record<string, string>;
  /** Open connections: `<service> → postgres|api`, and PostgreSQL sessions per `role/application`. */
  connections: Record<string, number>;
  /** Queue depths: `<service> <queue>`. */
  queues: Record<string, number>;
}

async function status(pid: number): Promise<Record<string, string> | undefined> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => undefined);
  if (!text) return undefined;
  return Object.fromEntries(
    text.split('\n').map((line) => {
      const at = line.indexOf(':');
      return [line.slice(0, at), line.slice(at + 1).trim()];
    }),
  );
}

const kib = (value: string | undefined) => Number.parseInt(value ?? '0', 10) || 0;
const mib = (kibibytes: number) => Math.round((kibibytes / 1024) * 10) / 10;

async function rssOf(pid: number | undefined): Promise<number | undefined> {
  if (!pid) return undefined;
  const s = await status(pid);
  return s ? kib(s.VmRSS) : undefined;
}

/** Every process of this machine: pid, parent and command line. */
async function processTable(): Promise<{ pid: number; ppid: number; argv: string[] }[]> {
  const out: { pid: number; ppid: number; argv: string[] }[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const [cmdline, s] = await Promise.all([
      readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => ''),
      status(pid),
    ]);
    if (!s) continue;
    out.push({ pid, ppid: kib(s.PPid), argv: cmdline.split('\0').filter(Boolean) });
  }
  return out;
}

/** Scrapes `/metrics` of a service and returns the values of `metric` by their labels. */
function metricValues(text: string, metric: string): { labels: string; value: number }[] {
  const out: { labels: string; value: number }[] = [];
  for (const line of text.split('\n')) {
    const match = new RegExp(`^${metric}(\\{[^}]*\\})? (\\S+)$`).exec(line);
    if (match) out.push({ labels: match[1] ?? '', value: Number(match[2]) });
  }
  return out;
}

const label = (labels: string, name: string) => new RegExp(`${name}="([^"]*)"`).exec(labels)?.[1] ?? '';

export async function sample(env: ChaosEnvironment, minute: number): Promise<Sample> {
  const rss: Record<string, number> = {};
  const pids: Record<string, string> = {};
  const note = (name: string, pid: number | undefined, kibibytes: number | undefined) => {
    if (!pid || kibibytes === undefined) return;
    rss[name] = mib(kibibytes);
    pids[name] = String(pid);
  };
  for (const name of SERVICES) {
    const pid = env.system.pid(name);
    note(name, pid, await rssOf(pid));
  }
  for (const [prefix, argoCd] of [
    [ARGO_CDS[0], env.argoCd],
    [ARGO_CDS[1], env.secondArgoCd],
  ] as const) {
    for (const p of argoCd.processes) note(`${prefix} ${p.name}`, p.child.pid, await rssOf(p.child.pid));
  }
  const table = await processTable();
  // The control plane's processes: those whose command line names its folder.
  for (const p of table) {
    const binary = p.argv[0]?.split('/').at(-1) ?? '';
    if (!['kube-apiserver', 'etcd'].includes(binary)) continue;
    if (!p.argv.some((arg) => arg.includes(env.controlPlane.workDir))) continue;
    note(binary, p.pid, await rssOf(p.pid));
  }
  // PostgreSQL: the postmaster (the parent of this session's backend) and its children, shared memory left
  // out (every backend maps the same shared buffers).
  const backend = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(env.system.db);
  const postmaster = kib((await status(backend.rows[0]?.pid ?? 0))?.PPid);
  if (postmaster) {
    let total = 0;
    for (const p of table.filter((q) => q.pid === postmaster || q.ppid === postmaster)) {
      const s = await status(p.pid);
      total += kib(s?.RssAnon) + kib(s?.RssFile);
    }
    note('postgres', postmaster, total);
  }

  const connections: Record<string, number> = {};
  for (const name of SERVICES) {
    connections[`${name} → postgres`] = env.proxies.postgres[name].open.forwarded;
    connections[`${name} → api`] = env.proxies.apiServer[name].open.forwarded;
  }
  for (const name of ARGO_CDS) connections[`${name} → api`] = env.proxies.apiServer[name].open.forwarded;
  const sessions = await sql<{ role: string; application: string; count: string }>`
    select usename as role, application_name as application, count(*) as count
    from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()
    group by 1, 2`.execute(env.system.db);
  for (const row of sessions.rows)
    connections[`pg ${row.role}/${row.application || '-'}`] = Number(row.count);

  const queues: Record<string, number> = {};
  for (const name of SERVICES) {
    const text = await env.system.metrics(name).catch(() => '');
    for (const { labels, value } of metricValues(text, 'workqueue_depth'))
      queues[`${name} ${label(labels, 'name')}`] = value;
    for (const { labels, value } of metricValues(text, 'gitops_operations')) {
      const state = label(labels, 'state');
      if (state !== 'Waiting' && state !== 'In_Progress') continue;
      const key = `${name} operations ${label(labels, 'engine_instance')} ${state}`;
      queues[key] = (queues[key] ?? 0) + value;
    }
  }
  return { minute, rss, pids, connections, queues };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? Number.NaN : (sorted[Math.floor((sorted.length - 1) / 2)] as number);
};

export interface SoakVerdict {
  /** One line per process/connection/queue: warm-up end, end, growth. */
  table: string[];
  problems: string[];
  figures: {
    rss: Record<string, { start: number; warm: number; end: number; growth: number | null }>;
    connections: Record<string, { start: number; warm: number; end: number }>;
    queues: Record<string, { max: number; end: number }>;
  };
}

/**
 * What the samples say. The warm-up is the first 10 % of them; "after warm-up" is the median of the next 10 %
 * and "end" the median of the last 10 % (medians: one sample caught in a garbage collection or a fault is not
 * a trend). A process whose pid changed in between (restarted) is shown, not compared.
 */
export function judge(samples: Sample[]): SoakVerdict {
  const n = samples.length;
  const tenth = Math.max(1, Math.round(n / 10));
  const warm = samples.slice(tenth, 2 * tenth);
  const end = samples.slice(n - tenth);
  const after = samples.slice(tenth);
  const problems: string[] = [];
  const table: string[] = [];
  const figures: SoakVerdict['figures'] = { rss: {}, connections: {}, queues: {} };

  const names = (pick: (s: Sample) => Record<string, number>) =>
    [...new Set(samples.flatMap((s) => Object.keys(pick(s))))].sort();
  const series = (window: Sample[], pick: (s: Sample) => Record<string, number>, key: string) =>
    window.map((s) => pick(s)[key]).filter((v): v is number => v !== undefined);

  table.push(`${'process (resident MiB)'.padEnd(56)}    start  after warm-up    end  growth`);
  for (const key of names((s) => s.rss)) {
    const start = samples[0]?.rss[key] ?? Number.NaN;
    const w = median(series(warm, (s) => s.rss, key));
    const e = median(series(end, (s) => s.rss, key));
    const restarted = new Set(after.map((s) => s.pids[key]).filter(Boolean)).size > 1;
    const growth = restarted ? null : Math.round(((e - w) / w) * 1000) / 1000;
    figures.rss[key] = { start, warm: w, end: e, growth };
    table.push(
      `${key.padEnd(56)}${String(start).padStart(9)}  ${String(w).padStart(13)}  ${String(e).padStart(5)}  ${
        growth === null ? 'restarted' : `${(growth * 100).toFixed(1)} %`
      }`,
    );
    if (growth !== null && growth >= MAX_GROWTH)
      problems.push(
        `${key}: resident memory grew ${(growth * 100).toFixed(1)} % after the warm-up (${w} → ${e} MiB)`,
      );
  }
  table.push(`${'connections'.padEnd(56)}start  after warm-up  end`);
  for (const key of names((s) => s.connections)) {
    const start = samples[0]?.connections[key] ?? 0;
    const w = median(series(warm, (s) => s.connections, key)) || 0;
    const e = median(series(end, (s) => s.connections, key)) || 0;
    figures.connections[key] = { start, warm: w, end: e };
    table.push(
      `${key.padEnd(56)}${String(start).padStart(5)}  ${String(w).padStart(13)}  ${String(e).padStart(3)}`,
    );
    if (e > w * (1 + MAX_GROWTH) && e > w + CONNECTION_SLACK)
      problems.push(`${key}: open connections grew from ${w} to ${e} after the warm-up`);
  }
  table.push(`${'queue (depth after warm-up)'.padEnd(56)}max  end`);
  for (const key of names((s) => s.queues)) {
    const depths = series(after, (s) => s.queues, key);
    const max = Math.max(0, ...depths);
    figures.queues[key] = { max, end: depths.at(-1) ?? 0 };
    table.push(`${key.padEnd(56)}${String(max).padStart(3)}  ${String(depths.at(-1) ?? 0).padStart(3)}`);
    const onlyGrows =
      depths.length > 2 &&
      depths.every((d, i) => i === 0 || d >= (depths[i - 1] as number)) &&
      (depths.at(-1) as number) > (depths[0] as number);
    if (onlyGrows) problems.push(`${key}: its depth only grew after the warm-up (${depths.join(', ')})`);
  }
  return { table, problems, figures };
}
