/**
 * `kubectl gitops instances [-n <argocd-namespace>]`: every engine instance as the database has it (namespace,
 * cluster, agents, whether one listens, tenants, applications, cordon) with its GitOpsEngineInstance's drain
 * state; `kubectl gitops instances cordon|uncordon|drain|undrain <name> [--wait]`: the declared way to steer an
 * instance, a merge patch of its GitOpsEngineInstance's `spec.cordoned` / `spec.drain` through the API server
 * (the backend applies it to the database; docs/engine-instances.md). Those never write the database.
 * `kubectl gitops instances admit <name> --namespace <argocd-namespace> [--secret <name>]`: the instance's own
 * database role (`admitEngineInstance`, migration 0012) with a new password, and the agent's connection string,
 * printed once or written into a Secret; `instances rotate-key <name>` (both in instances-admit.ts).
 * `instances holds|confirm-deletions <name>`: the deletes its deletion guard holds, and an operator's word that
 * they may go ahead (docs/deletion-guard.md).
 */
import { EngineInstanceConditionType } from '@gitops/api';
import {
  confirmDeletionHolds,
  getEngineInstanceByName,
  listDeletionHolds,
  listEngineInstanceOverviews,
} from '@gitops/db';
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
import { admit, rotateKey } from './instances-admit.ts';

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
  if (input.options.secret !== undefined && sub !== 'admit') {
    throw new CliError("--secret goes with 'instances admit' only");
  }
  if (Object.hasOwn(actions, sub)) return await steer(sub as Action, { ...input, args: rest });
  if (sub === 'admit') return await admit({ ...input, args: rest });
  if (sub === 'rotate-key') return await rotateKey({ ...input, args: rest });
  if (sub === 'holds' || sub === 'confirm-deletions')
    return await deletionHolds(sub, { ...input, args: rest });
  throw new CliError(
    `unknown instances subcommand '${sub}': use cordon, uncordon, drain, undrain, admit, rotate-key, holds or confirm-deletions, or none to list`,
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
    /** Its database role (null: not admitted, its agents use the backend's) and the key sealed with. */
    role: r.db_role,
    key: r.sealing_key_id,
    keyRotationRequested: r.key_rotation_requested_at !== null,
    object: objects.get(r.name) ?? null,
  }));
  if (isStructured(format)) {
    io.out(formatStructured(format, { instances: view }));
    return ExitCode.ok;
  }
  if (view.length === 0) {
    io.out(
      options.namespace === undefined
        ? 'no engine instances registered (one is when it is admitted, or when its cluster-agent or a backend first runs)'
        : `no engine instance of namespace ${options.namespace}`,
    );
    return ExitCode.ok;
  }
  // -o wide: the applications it still releases in a move, its object's Available condition, its database role
  // and the key the backend seals with for it (`rotating` while a new one is asked for).
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
        ...(wide ? ['AVAILABLE', 'ROLE', 'KEY'] : []),
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
        ...(wide
          ? [
              v.object?.available ?? '-',
              v.role ?? "- (backend's)",
              `${v.key ?? '-'}${v.keyRotationRequested ? ' (rotating)' : ''}`,
            ]
          : []),
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

/**
 * `instances holds <name>`: the deletes of Argo CD Applications the instance's deletion guard holds, with why
 * (docs/deletion-guard.md). `instances confirm-deletions <name>`: an operator's word that every delete held now
 * may go ahead (the agent deletes them, pruning, within seconds); one held later needs its own confirmation.
 */
async function deletionHolds(
  sub: 'holds' | 'confirm-deletions',
  { args, options, format, ctx, io }: CommandInput,
): Promise<number> {
  const [name, ...extra] = args;
  if (!name || extra.length > 0) throw new CliError(`usage: kubectl gitops instances ${sub} <name>`);
  if (options.wait) throw new CliError('--wait goes with cordon, uncordon, drain and undrain');
  const db = await ctx.db();
  const instance = await getEngineInstanceByName(db, name);
  if (!instance) {
    throw new CliError(
      `no engine instance ${name} is registered (kubectl gitops instances lists them)`,
      ExitCode.failed,
    );
  }
  const rows =
    sub === 'holds' ? await listDeletionHolds(db, instance.id) : await confirmDeletionHolds(db, instance.id);
  const view = rows.map((h) => ({
    application: h.application_name,
    applicationId: h.application_id,
    tenant: h.cluster_user_id,
    reason: h.reason,
    heldAt: h.held_at.toISOString(),
    confirmed: h.confirmed_at !== null,
    message: h.message,
  }));
  if (isStructured(format)) {
    io.out(formatStructured(format, { name, [sub === 'holds' ? 'holds' : 'confirmed']: view }));
    return ExitCode.ok;
  }
  if (view.length === 0) {
    io.out(
      sub === 'holds'
        ? `engine instance ${name} holds no deletion`
        : `engine instance ${name}: no unconfirmed deletion to confirm`,
    );
    return ExitCode.ok;
  }
  io.out(
    formatTable(
      ['APPLICATION', 'REASON', 'HELD AT', 'CONFIRMED'],
      view.map((h) => [h.application, h.reason, h.heldAt, h.confirmed ? 'yes' : 'no']),
    ),
  );
  io.out(
    sub === 'holds'
      ? `to let them go ahead (Argo CD prunes what they deployed): kubectl gitops instances confirm-deletions ${name}`
      : `confirmed ${view.length}: the agent of ${name} deletes them (pruning) within seconds`,
  );
  return ExitCode.ok;
}
