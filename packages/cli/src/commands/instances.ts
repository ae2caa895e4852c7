/**
 * `kubectl gitops instances [-n <argocd-namespace>]`: every engine instance as the database has it (namespace,
 * cluster, agents, whether one listens, tenants, applications, cordon) with its GitOpsEngineInstance's drain
 * state; `kubectl gitops instances cordon|uncordon|drain|undrain <name> [--wait]`: the declared way to steer an
 * instance, a merge patch of its GitOpsEngineInstance's `spec.cordoned` / `spec.drain` through the API server
 * (the backend applies it to the database; docs/engine-instances.md). Nothing here writes the database.
 */
import { EngineInstanceConditionType } from '@gitops/api';
import { listEngineInstanceOverviews } from '@gitops/db';
import { isNotFound, type KubeConfig, type KubeObject, sleep, systemClock } from '@gitops/shared';
import type { Command, CommandInput } from '../command.ts';
import { CliError, ExitCode } from '../context.ts';
import {
  conditionOf,
  engineInstancePath,
  engineInstancesPath,
  getOrUndefined,
  listObjects,
  mergePatch,
} from '../kube.ts';
import { formatStructured, formatTable, isStructured } from '../output.ts';

/** How long `--wait` waits for the backend to take the new spec (it reacts to the object's change at once). */
const WAIT_TIMEOUT_MS = 60_000;

const actions = {
  cordon: { field: 'cordoned', value: true },
  uncordon: { field: 'cordoned', value: false },
  drain: { field: 'drain', value: true },
  undrain: { field: 'drain', value: false },
} as const;
type Action = keyof typeof actions;

export const instances: Command = async (input) => {
  const [sub, ...rest] = input.args;
  if (sub === undefined || sub === 'list') {
    if (rest.length > 0) throw new CliError('usage: kubectl gitops instances');
    return await list(input);
  }
  if (Object.hasOwn(actions, sub)) return await steer(sub as Action, { ...input, args: rest });
  throw new CliError(
    `unknown instances subcommand '${sub}': use cordon, uncordon, drain or undrain, or none to list`,
  );
};

interface ObjectView {
  cordoned: boolean;
  drain: boolean;
  observedGeneration: number | null;
  generation: number | null;
  available: string | null;
  drained: { status: string; reason: string | null; message: string | null } | null;
}

function objectView(object: KubeObject): ObjectView {
  const spec = (object.spec ?? {}) as { cordoned?: unknown; drain?: unknown };
  const status = (object.status ?? {}) as { observedGeneration?: unknown };
  const drained = conditionOf(object, EngineInstanceConditionType.Drained);
  return {
    cordoned: spec.cordoned === true,
    drain: spec.drain === true,
    observedGeneration: typeof status.observedGeneration === 'number' ? status.observedGeneration : null,
    generation: object.metadata.generation ?? null,
    available: conditionOf(object, EngineInstanceConditionType.Available)?.status ?? null,
    drained: drained
      ? { status: drained.status, reason: drained.reason ?? null, message: drained.message ?? null }
      : null,
  };
}

async function list({ options, format, ctx, io }: CommandInput): Promise<number> {
  if (options.wait) throw new CliError('--wait goes with cordon, uncordon, drain and undrain');
  const db = await ctx.db();
  const kc = await ctx.kube();
  // -n: the instance(s) of that Argo CD namespace.
  const rows = (await listEngineInstanceOverviews(db)).filter(
    (r) => options.namespace === undefined || r.namespace_name === options.namespace,
  );
  // Without the GitOpsEngineInstance CRD (an older installation) the database's view is still shown.
  const listed = await listObjects(kc, engineInstancesPath()).catch((err: unknown) => {
    if (isNotFound(err)) return [];
    throw err;
  });
  const objects = new Map(listed.map((o) => [o.metadata.name, objectView(o)]));
  const view = rows.map((r) => ({
    name: r.name,
    namespace: r.namespace_name,
    cluster: r.cluster_identity,
    agents: r.agents,
    listening: r.listening,
    tenants: r.tenants,
    applications: r.applications,
    releasing: r.releasing,
    cordoned: r.cordoned,
    object: objects.get(r.name) ?? null,
  }));
  if (isStructured(format)) {
    io.out(formatStructured(format, { instances: view }));
    return ExitCode.ok;
  }
  if (view.length === 0) {
    io.out(
      options.namespace === undefined
        ? 'no engine instances registered (none starts before its cluster-agent or a backend has run)'
        : `no engine instance of namespace ${options.namespace}`,
    );
    return ExitCode.ok;
  }
  // -o wide: the applications it still releases in a move, and its object's Available condition.
  const wide = format === 'wide';
  io.out(
    formatTable(
      [
        'NAME',
        'NAMESPACE',
        'CLUSTER',
        'AGENTS',
        'LISTENING',
        'TENANTS',
        'APPLICATIONS',
        ...(wide ? ['RELEASING'] : []),
        'CORDONED',
        'DRAIN',
        ...(wide ? ['AVAILABLE'] : []),
      ],
      view.map((v) => [
        v.name,
        v.namespace,
        v.cluster || '-',
        String(v.agents),
        v.listening ? 'true' : 'false',
        String(v.tenants),
        String(v.applications),
        ...(wide ? [String(v.releasing)] : []),
        String(v.cordoned),
        drainText(v.object),
        ...(wide ? [v.object?.available ?? '-'] : []),
      ]),
    ),
  );
  if (view.some((v) => v.object === null)) {
    io.out('(no object): the instance has no GitOpsEngineInstance yet; the backend creates it within 15 s');
  }
  return ExitCode.ok;
}

function drainText(object: ObjectView | null): string {
  if (!object) return '(no object)';
  if (!object.drain) return '-';
  return object.drained?.reason ?? 'requested';
}

async function steer(action: Action, { args, options, format, ctx, io }: CommandInput): Promise<number> {
  const [name, ...extra] = args;
  if (!name || extra.length > 0)
    throw new CliError(`usage: kubectl gitops instances ${action} <name> [--wait]`);
  const { field, value } = actions[action];
  const kc = await ctx.kube();
  const path = engineInstancePath(name);
  const before = await getOrUndefined(kc, path);
  if (!before) {
    throw new CliError(
      `there is no GitOpsEngineInstance '${name}': kubectl gitops instances lists the registered instances (the backend creates an object for each)`,
      ExitCode.failed,
    );
  }
  const current = objectView(before);
  const unchanged = (field === 'cordoned' ? current.cordoned : current.drain) === value;
  const after = unchanged ? before : await mergePatch(kc, path, { spec: { [field]: value } });
  let taken: boolean | undefined;
  if (options.wait) taken = await waitForBackend(kc, path, after.metadata.generation ?? 0);
  if (isStructured(format)) {
    io.out(
      formatStructured(format, {
        name,
        action,
        changed: !unchanged,
        spec: { [field]: value },
        ...(options.wait ? { applied: taken } : {}),
      }),
    );
  } else {
    io.out(
      unchanged
        ? `engine instance ${name}: spec.${field} is already ${value}`
        : `engine instance ${name}: spec.${field} set to ${value}`,
    );
    io.out(effect(action, name));
    if (taken === true) io.out('the backend has applied it');
    if (taken === false) {
      io.out(
        `the backend has not applied it within ${WAIT_TIMEOUT_MS / 1000}s: is a backend running? (kubectl gitops doctor)`,
      );
    }
  }
  return taken === false ? ExitCode.failed : ExitCode.ok;
}

function effect(action: Action, name: string): string {
  switch (action) {
    case 'cordon':
      return 'the instance takes no new tenants; its tenants stay';
    case 'uncordon':
      return 'the instance takes new tenants again';
    case 'drain':
      return `the backend cordons the instance and moves its tenants away; follow with: kubectl get gei ${name} -o jsonpath='{.status.conditions[?(@.type=="Drained")].message}'`;
    case 'undrain':
      return `no more tenants are moved; the instance stays cordoned until: kubectl gitops instances uncordon ${name}`;
  }
}

/** Waits until the backend has taken `generation` (status.observedGeneration); false after the timeout. */
async function waitForBackend(kc: KubeConfig, path: string, generation: number): Promise<boolean> {
  const deadline = Date.now() + WAIT_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const object = await getOrUndefined(kc, path);
    if (!object) return false;
    const observed = objectView(object).observedGeneration;
    if (observed !== null && observed >= generation) return true;
    await sleep(systemClock, 500);
  }
  return false;
}
