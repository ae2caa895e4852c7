/**
 * Prometheus registry factory and get-or-create helpers.
 *
 * Several controllers (work queues, informers) share one metric family with different label
 * values, so metrics are looked up by name in the registry before being created.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export type { Registry } from 'prom-client';

export interface CreateMetricsRegistryOptions {
  /** Collect Node.js process metrics (CPU, memory, event loop lag, GC). Default true. */
  defaultMetrics?: boolean;
  /** Labels added to every series, e.g. `{ component: 'backend' }`. */
  defaultLabels?: Record<string, string>;
}

/** A fresh registry (never the global one, so tests and several servers in one process stay apart). */
export function createMetricsRegistry(options: CreateMetricsRegistryOptions = {}): Registry {
  const registry = new Registry();
  if (options.defaultLabels) registry.setDefaultLabels(options.defaultLabels);
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  return registry;
}

interface MetricSpec<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
}

/** Returns the registry's counter of that name, creating it on first use. */
export function getOrCreateCounter<L extends string>(registry: Registry, spec: MetricSpec<L>): Counter<L> {
  const existing = registry.getSingleMetric(spec.name);
  if (existing) return assertKind(existing, Counter, spec.name);
  return new Counter({ ...spec, registers: [registry] });
}

/** Returns the registry's gauge of that name, creating it on first use. */
export function getOrCreateGauge<L extends string>(registry: Registry, spec: MetricSpec<L>): Gauge<L> {
  const existing = registry.getSingleMetric(spec.name);
  if (existing) return assertKind(existing, Gauge, spec.name);
  return new Gauge({ ...spec, registers: [registry] });
}

/** Returns the registry's histogram of that name, creating it on first use. */
export function getOrCreateHistogram<L extends string>(
  registry: Registry,
  spec: MetricSpec<L> & { buckets: readonly number[] },
): Histogram<L> {
  const existing = registry.getSingleMetric(spec.name);
  if (existing) return assertKind(existing, Histogram, spec.name);
  return new Histogram({ ...spec, buckets: [...spec.buckets], registers: [registry] });
}

const gaugeHooks = new WeakMap<object, Set<() => void>>();

/**
 * A gauge whose values are computed when scraped (e.g. "age of the last watch event").
 * Each caller adds a hook; the returned function removes it again.
 */
export function addGaugeCollector<L extends string>(
  registry: Registry,
  spec: MetricSpec<L>,
  hook: (gauge: Gauge<L>) => void,
): { gauge: Gauge<L>; remove: () => void } {
  let gauge = registry.getSingleMetric(spec.name) as Gauge<L> | undefined;
  if (!gauge) {
    const hooks = new Set<() => void>();
    gauge = new Gauge({
      ...spec,
      registers: [registry],
      collect() {
        for (const run of hooks) run();
      },
    });
    gaugeHooks.set(gauge, hooks);
  }
  const hooks = gaugeHooks.get(gauge);
  if (!hooks) throw new Error(`metric ${spec.name} exists but was not created by addGaugeCollector`);
  const target = gauge;
  const run = () => hook(target);
  hooks.add(run);
  return { gauge, remove: () => hooks.delete(run) };
}

/**
 * Gauges whose values come from elsewhere (e.g. the database) and are read together when /metrics is
 * scraped: one `read` per scrape, shared by the gauges (a registry collects them concurrently), so nothing
 * is read between scrapes. `read` resets and sets them; when it throws, the gauges keep their last values.
 */
export function addScrapedGauges<N extends string, L extends string>(
  registry: Registry,
  specs: Record<N, MetricSpec<L>>,
  read: (gauges: Record<N, Gauge<L>>) => Promise<void>,
): Record<N, Gauge<L>> {
  let reading: Promise<void> | undefined;
  const readOnce = () => {
    reading ??= read(gauges).finally(() => {
      reading = undefined;
    });
    return reading;
  };
  const gauges = Object.fromEntries(
    (Object.entries(specs) as [N, MetricSpec<L>][]).map(([key, spec]) => [
      key,
      new Gauge({
        ...spec,
        registers: [registry],
        async collect() {
          await readOnce();
        },
      }),
    ]),
  ) as Record<N, Gauge<L>>;
  return gauges;
}

function assertKind<M>(metric: unknown, kind: abstract new (...args: never[]) => M, name: string): M {
  if (!(metric instanceof kind)) throw new Error(`metric ${name} is already registered with another type`);
  return metric;
}
