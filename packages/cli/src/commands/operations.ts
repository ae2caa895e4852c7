/**
 * `kubectl gitops operations [--stuck=<duration>] [--failed] [--instance <name>] [-n <namespace>]`: operations
 * that have waited or run longer than the threshold (default 5m) and Failed ones, with why (-n: those whose
 * owner is in that namespace); `kubectl gitops operations retry <id>... | --all-failed [--instance <name>]
 * [-n <namespace>]` puts them back to Waiting, due now (docs/data-model.md, "The operation lifecycle": the
 * agent's Waiting sweep takes them within seconds).
 */
import {
  type Db,
  listFailedOperationIds,
  listOperationsNeedingAttention,
  type OperationInView,
  type OperationRetryResult,
  retryOperationNow,
} from '@gitops/db';
import { formatDuration, parseDuration } from '@gitops/shared';
import type { Command, CommandInput } from '../command.ts';
import { CliError, ExitCode } from '../context.ts';
import { formatAge, formatStructured, formatTable, isStructured, oneLine } from '../output.ts';

const DEFAULT_STUCK = '5m';
/** At most this many are listed, oldest first (the table says so when it is cut). */
const LIST_LIMIT = 500;
/** `retry --all-failed -n` looks at this many Failed operations, oldest first (run again for more). */
const RETRY_SCAN_LIMIT = 10_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const operations: Command = async (input) => {
  const [sub, ...rest] = input.args;
  if (sub === 'retry') return await retry({ ...input, args: rest });
  if (sub !== undefined)
    throw new CliError(`unknown operations subcommand '${sub}': use 'retry', or none to list`);
  return await list(input);
};

async function list({ options, format, ctx, io }: CommandInput): Promise<number> {
  if (options['all-failed']) throw new CliError("--all-failed belongs to 'operations retry'");
  const both = options.stuck === undefined && !options.failed;
  let stuckForMs: number | undefined;
  if (options.stuck !== undefined || both) {
    stuckForMs = parseDuration(options.stuck ?? DEFAULT_STUCK);
    if (stuckForMs === undefined) {
      throw new CliError(`--stuck must be a duration like 30s, 5m or 1h (got "${options.stuck}")`);
    }
  }
  const failed = options.failed === true || both;
  const db = await ctx.db();
  const listed = await listOperationsNeedingAttention(db, {
    stuckForMs,
    failed,
    engineInstanceName: options.instance,
    limit: LIST_LIMIT,
  });
  // -n filters the owner's namespace here (the query has no such filter): of the oldest LIST_LIMIT only.
  const namespace = options.namespace;
  const rows = namespace === undefined ? listed : listed.filter((o) => o.owner_namespace === namespace);
  const cut = listed.length === LIST_LIMIT;
  if (isStructured(format)) {
    io.out(formatStructured(format, { operations: rows.map(view) }));
    return ExitCode.ok;
  }
  const what = [
    stuckForMs === undefined
      ? undefined
      : `Waiting or In_Progress for more than ${formatDuration(stuckForMs)}`,
    failed ? 'Failed' : undefined,
  ]
    .filter(Boolean)
    .join(', or ');
  const where = [
    options.instance === undefined ? '' : ` of engine instance ${options.instance}`,
    namespace === undefined ? '' : ` of namespace ${namespace}`,
  ].join('');
  const cutNote = `(of the oldest ${LIST_LIMIT} only; narrow with --instance or --failed)`;
  if (rows.length === 0) {
    io.out(`no operations${where} ${what}${cut && namespace !== undefined ? ` ${cutNote}` : ''}`);
    return ExitCode.ok;
  }
  io.out(`${rows.length} operation${rows.length === 1 ? '' : 's'}${where} ${what}:`);
  // -o wide: when it last changed and when it was last attempted; messages whole.
  const wide = format === 'wide';
  io.out(
    formatTable(
      [
        'ID',
        'STATE',
        'AGE',
        ...(wide ? ['UPDATED', 'LAST ATTEMPT'] : []),
        'INSTANCE',
        'AGENT',
        'RESOURCE',
        'OWNER',
        'ATTEMPTS',
        'MESSAGE',
      ],
      rows.map((o) => [
        o.id,
        o.state,
        formatAge(o.created_at),
        ...(wide ? [formatAge(o.updated_at), formatAge(o.last_attempt_at)] : []),
        o.engine_instance_name,
        o.agent_listening ? 'listening' : 'AWAY',
        `${o.resource_type}/${o.resource_id}`,
        o.owner_kind ? `${o.owner_kind} ${o.owner_namespace}/${o.owner_name}` : '-',
        String(o.attempts),
        wide ? o.message.replace(/\s+/g, ' ') : oneLine(whyOf(o), 80),
      ]),
    ),
  );
  if (cut) io.out(cutNote);
  if (rows.some((o) => !o.agent_listening)) {
    io.out(
      'AWAY: no agent of that engine instance listens now; its operations wait until one is back (kubectl gitops doctor).',
    );
  }
  if (rows.some((o) => o.state === 'Failed')) {
    io.out('retry: kubectl gitops operations retry <id> | --all-failed');
  }
  return ExitCode.ok;
}

/** The message, or what the row says when there is none yet. */
function whyOf(o: OperationInView): string {
  if (o.message) return o.message;
  if (o.state === 'Waiting' && o.attempts === 0) return '(not started yet)';
  if (o.state === 'In_Progress') return '(an agent is working on it)';
  return '';
}

function view(o: OperationInView) {
  return {
    id: o.id,
    state: o.state,
    engineInstance: o.engine_instance_name,
    agentListening: o.agent_listening,
    resource: { type: o.resource_type, id: o.resource_id },
    owner: o.owner_kind
      ? { kind: o.owner_kind, namespace: o.owner_namespace, name: o.owner_name, uid: o.owner_uid }
      : null,
    attempts: o.attempts,
    message: o.message,
    createdAt: o.created_at.toISOString(),
    updatedAt: o.updated_at.toISOString(),
    lastAttemptAt: o.last_attempt_at?.toISOString() ?? null,
    nextAttemptAt: o.next_attempt_at.toISOString(),
    finishedAt: o.finished_at?.toISOString() ?? null,
  };
}

async function retry({ args, options, format, ctx, io }: CommandInput): Promise<number> {
  if (options.stuck !== undefined || options.failed) {
    throw new CliError(
      "'operations retry' takes operation ids or --all-failed (with --instance), not --stuck/--failed",
    );
  }
  if (options['all-failed'] === args.length > 0) {
    throw new CliError('usage: kubectl gitops operations retry <id>... | --all-failed [--instance <name>]');
  }
  if (args.length > 0 && options.instance !== undefined) {
    throw new CliError('--instance goes with --all-failed only');
  }
  if (args.length > 0 && options.namespace !== undefined) {
    throw new CliError('-n/--namespace goes with --all-failed only (operation ids name their operations)');
  }
  for (const id of args) if (!UUID.test(id)) throw new CliError(`'${id}' is not an operation id (a uuid)`);
  const db = await ctx.db();
  const ids = !options['all-failed']
    ? args
    : options.namespace === undefined
      ? await listFailedOperationIds(db, { engineInstanceName: options.instance })
      : await failedOfNamespace(db, options.namespace, options.instance);
  const results: { id: string; result: OperationRetryResult }[] = [];
  for (const id of ids) results.push({ id, result: await retryOperationNow(db, id) });
  const ok = (r: OperationRetryResult) =>
    r.status === 'retried' || r.status === 'due-now' || r.status === 'superseded';
  if (isStructured(format)) {
    io.out(
      formatStructured(format, {
        results: results.map(({ id, result }) => ({
          id,
          status: result.status,
          ...(result.status === 'superseded' ? { by: result.by.id } : {}),
          ...('operation' in result ? { state: result.operation.state } : {}),
        })),
      }),
    );
  } else if (results.length === 0) {
    io.out(
      `no Failed operations${options.instance === undefined ? '' : ` of engine instance ${options.instance}`}${options.namespace === undefined ? '' : ` of namespace ${options.namespace}`}`,
    );
  } else {
    for (const { id, result } of results) io.out(`${id}: ${describe(result)}`);
    if (results.some((r) => ok(r.result))) {
      io.out(
        "an agent of the operation's engine instance takes it within seconds (its Waiting sweep); follow with: kubectl gitops operations",
      );
    }
  }
  return results.every((r) => ok(r.result)) ? ExitCode.ok : ExitCode.failed;
}

/**
 * The Failed operations whose owner is in `namespace` (`retry --all-failed -n`): read with the list's query, the
 * oldest RETRY_SCAN_LIMIT Failed ones; a namespace with more is retried again by running the command again.
 */
async function failedOfNamespace(db: Db, namespace: string, instance: string | undefined): Promise<string[]> {
  const failed = await listOperationsNeedingAttention(db, {
    failed: true,
    engineInstanceName: instance,
    limit: RETRY_SCAN_LIMIT,
  });
  return failed.filter((o) => o.state === 'Failed' && o.owner_namespace === namespace).map((o) => o.id);
}

function describe(result: OperationRetryResult): string {
  switch (result.status) {
    case 'retried':
      return 'retried: Waiting again, due now, attempts counted from 0';
    case 'due-now':
      return 'was Waiting: due now';
    case 'superseded':
      return `stays Failed: operation ${result.by.id} of the same resource waits and does the work; it is due now`;
    case 'not-retryable':
      return result.operation.state === 'In_Progress'
        ? 'not retried: In_Progress (an agent works on it; a stale one is handed back by a running agent after OPERATION_STALE_AFTER, 2 min)'
        : `not retried: ${result.operation.state}`;
    case 'not-found':
      return 'not found (finished operations are deleted after OPERATION_RETENTION, 24 h)';
  }
}
