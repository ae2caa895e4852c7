/**
 * The admin CLI (`kubectl gitops ...`, docs/admin-cli.md): parses the command line with node:util's parseArgs
 * (kubectl's options of every command: -n/--namespace, -A/--all-namespaces, -o/--output, --kubeconfig,
 * --context; then each command's own), runs one command, and maps errors to exit codes: 0 done, 1 the command
 * found a problem, 2 it could not run (bad arguments, missing configuration, database or API server
 * unreachable). Expected errors are one line without a stack trace; every line printed goes through the secret
 * filter (output.ts).
 */
import { parseArgs } from 'node:util';
import type { Command, Options } from './command.ts';
import { doctor } from './commands/doctor.ts';
import { instances } from './commands/instances.ts';
import { operations } from './commands/operations.ts';
import { reseal } from './commands/reseal.ts';
import { status } from './commands/status.ts';
import { CliError, createContext, ExitCode } from './context.ts';
import { type Io, isOutputFormat, type OutputFormat, outputFormats, redactingWriter } from './output.ts';

/** The options every command takes, as kubectl spells them. */
const globalOptionSpecs = {
  namespace: { type: 'string', short: 'n' },
  'all-namespaces': { type: 'boolean', short: 'A' },
  output: { type: 'string', short: 'o' },
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The options of one command or another; `commands[...].options` says which takes which. */
const commandOptionSpecs = {
  stuck: { type: 'string' },
  failed: { type: 'boolean' },
  instance: { type: 'string' },
  'all-failed': { type: 'boolean' },
  batch: { type: 'string' },
  'dry-run': { type: 'boolean' },
  wait: { type: 'boolean' },
  secret: { type: 'string' },
  'secret-namespace': { type: 'string' },
} as const;

type CommandOption = keyof typeof commandOptionSpecs;

const commands: Record<string, { run: Command; options: CommandOption[]; help: string }> = {
  status: {
    run: status,
    options: [],
    help: `kubectl gitops status [<namespace> | -n <namespace> | -A]
  A tenant's GitOpsDeployments: sync, health, engine instance, ErrorOccurred, and the latest operation of
  each (state, age, message). Reads the objects from the API server and the rows from the database. Without a
  namespace, the kubeconfig context's; -A: every namespace that has GitOpsDeployments (a NAMESPACE column).
  -o wide adds APPLICATION (the Argo CD Application) and OPERATION (the latest operation's id).`,
  },
  operations: {
    run: operations,
    options: ['stuck', 'failed', 'instance', 'all-failed'],
    help: `kubectl gitops operations [--stuck=<duration>] [--failed] [--instance <name>] [-n <namespace> | -A]
  Operations Waiting or In_Progress for longer than --stuck (default 5m) and Failed ones (both without a
  flag), with resource, instance, owner, attempts, message and whether an agent of the instance listens.
  -n: those whose owner is in that namespace; -A (the default): every namespace.
  -o wide adds UPDATED and LAST ATTEMPT (ages).
kubectl gitops operations retry <id>... | --all-failed [--instance <name>] [-n <namespace>]
  Puts Failed operations back to Waiting, due now (a Waiting one becomes due now); the agent takes them.
  With --all-failed, -n retries only those whose owner is in that namespace.`,
  },
  reseal: {
    run: reseal,
    options: ['batch', 'dry-run'],
    help: `kubectl gitops reseal [--batch N] [--dry-run]
  Re-encrypts every sealed value in the database under the active key of GITOPS_ENCRYPTION_KEYS (N rows a
  batch, default 100). Values already under it are skipped, so it can be run again after an interruption.
  Prints counts per column; a value that does not open is named by row id and key id.`,
  },
  doctor: {
    run: doctor,
    options: [],
    help: `kubectl gitops doctor
  Checks the API server, the CRDs, the database and its migrations, the encryption keys, and each engine
  instance (agent listening, its GitOpsEngineInstance, Argo CD settings): OK/WARN/SKIP/FAIL, one line each.
  Exit code 1 when a check fails, 2 when the database or the API server cannot be checked.`,
  },
  instances: {
    run: instances,
    options: ['wait', 'secret', 'secret-namespace'],
    help: `kubectl gitops instances [-n <argocd-namespace>]
  Every engine instance: namespace, cluster, agents, listening, tenants, applications, cordoned, drain;
  -n: the instance of that Argo CD namespace. -o wide adds RELEASING, AVAILABLE, ROLE (its database role)
  and KEY (the key the backend seals with for it).
kubectl gitops instances cordon|uncordon|drain|undrain <name> [--wait]
  Sets spec.cordoned / spec.drain of its GitOpsEngineInstance (the backend applies it); --wait waits up to
  60 s until the backend has taken it.
kubectl gitops instances admit <name> --namespace <argocd-namespace> [--secret <name> [--secret-namespace <ns>]]
  Admits an engine instance: its database role, with a new password (an admitted one gets a new password; the
  old one stops working for new connections). Prints the agent's DATABASE_URL once, or with --secret writes
  it as key url of that Secret (in --secret-namespace, default the instance's namespace; server-side apply)
  and prints its name.
kubectl gitops instances rotate-key <name>
  Asks the instance's agent for a new key pair; the backend re-seals its credentials with it, then the agent
  drops the old key. Nothing stops meanwhile.
kubectl gitops instances holds <name>
  The deletes of Argo CD Applications the instance's deletion guard holds (no proof that the GitOpsDeployment
  is gone, or beyond the deletion budget), with why (docs/deletion-guard.md).
kubectl gitops instances confirm-deletions <name>
  An operator's word: every delete held now goes ahead (Argo CD prunes what those Applications deployed).`,
  },
};

export const usage = `kubectl gitops: the GitOps Service's admin CLI (docs/admin-cli.md)

Commands:
${Object.values(commands)
  .map((c) => c.help)
  .join('\n')}

Options of every command (kubectl's):
  -n, --namespace <name>         the namespace: a tenant's (status, operations), an engine instance's Argo CD
                                 namespace (instances); commands of cluster-wide things (doctor, reseal,
                                 instances cordon/drain) take it and ignore it, as kubectl does
  -A, --all-namespaces           every namespace (status; the default of operations and instances)
  -o, --output table|wide|json|yaml
                                 default table; wide adds the columns named above where a command has
                                 hidden ones and does not shorten messages, else it is the same table;
                                 json and yaml print the same fields
  --kubeconfig <file>            instead of KUBECONFIG
  --context <name>               this context of the kubeconfig for every Kubernetes call
  -h, --help                     this help

Configuration (as the backend takes it): DATABASE_URL, KUBECONFIG, GITOPS_ENCRYPTION_KEYS (reseal, doctor).
Exit codes: 0 done, 1 the command found a problem, 2 it could not run (arguments, configuration, connection).`;

/** A command line that cannot be run: its message, the command it is about, and the help to show after it. */
export class UsageError extends Error {
  readonly command: string | undefined;
  readonly help: string;

  constructor(message: string, command: string | undefined, help: string) {
    super(message);
    this.name = 'UsageError';
    this.command = command;
    this.help = help;
  }
}

export interface CommandLine {
  /** The command's name; undefined with none (help). */
  name: string | undefined;
  /** The positional arguments after the name. */
  args: string[];
  options: Options;
  format: OutputFormat;
}

/**
 * Parses `args` (without node and the script) with parseArgs: options anywhere (kubectl's `kubectl gitops -n x
 * status` works too), kubectl's spellings (`-n x`, `-nx`, `-n=x`, `--namespace=x`). Throws a UsageError for an
 * unknown option (naming it), a command's option given to another command, an unknown -o, or -n with -A.
 */
export function parseCommandLine(args: readonly string[]): CommandLine {
  const given = args[0] === '--' ? args.slice(1) : [...args];
  // kubectl (pflag) reads `-o=json` as `-o json`; parseArgs would take "=json" as the value.
  const normalized = given.flatMap((arg) => {
    const inline = /^-([no])=(.*)$/s.exec(arg);
    return inline ? [`-${inline[1]}`, inline[2]!] : [arg];
  });
  // For the messages of a line parseArgs refuses (it says nothing of positionals then).
  const named = normalized.find((arg) => Object.hasOwn(commands, arg));
  const help = named ? commands[named]!.help : "run 'kubectl gitops --help' for the commands";
  let parsed: ReturnType<typeof parseAll>;
  try {
    parsed = parseAll(normalized);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const unknown = /^Unknown option '([^']+)'/.exec((err as Error).message);
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && unknown) {
      throw new UsageError(`unknown option '${unknown[1]}'`, named, help);
    }
    throw new UsageError((err as Error).message, named, help);
  }
  const options = parsed.values as Options;
  const [name, ...rest] = parsed.positionals;
  const command = name !== undefined && Object.hasOwn(commands, name) ? commands[name] : undefined;
  const about = command ? name : undefined;
  if (command) {
    const foreign = (Object.keys(options) as (keyof Options)[]).filter(
      (o) => o in commandOptionSpecs && !command.options.includes(o as CommandOption),
    );
    if (foreign.length > 0) throw new UsageError(`does not take --${foreign.join(', --')}`, about, help);
  }
  const format = options.output ?? 'table';
  if (!isOutputFormat(format)) {
    throw new UsageError(`--output must be ${outputFormats.join(', ')} (got "${format}")`, about, help);
  }
  if (options.namespace !== undefined && options['all-namespaces']) {
    throw new UsageError('-n/--namespace and -A/--all-namespaces: give one of them', about, help);
  }
  for (const option of ['namespace', 'context', 'kubeconfig'] as const) {
    if (options[option] === '') throw new UsageError(`--${option} needs a value`, about, help);
  }
  return { name, args: rest, options, format };
}

function parseAll(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    strict: true,
    options: { ...globalOptionSpecs, ...commandOptionSpecs },
  });
}

export interface RunOptions {
  env: Readonly<Record<string, string | undefined>>;
  io: Io;
}

/** Runs the CLI with `argv` (without node and the script); resolves to the exit code. */
export async function runCli(argv: readonly string[], { env, io: rawIo }: RunOptions): Promise<number> {
  let secrets: () => readonly string[] = () => [];
  const io: Io = {
    out: redactingWriter(rawIo.out, () => secrets()),
    err: redactingWriter(rawIo.err, () => secrets()),
  };
  let line: CommandLine;
  try {
    line = parseCommandLine(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.err(`kubectl gitops${err.command ? ` ${err.command}` : ''}: ${err.message}`);
    io.err(err.help);
    return ExitCode.cannotRun;
  }
  const { name, args: rest, options: values, format } = line;
  if (values.help || name === undefined || name === 'help') {
    const command = name === 'help' ? commands[rest[0] ?? ''] : name ? commands[name] : undefined;
    (name === undefined && !values.help ? io.err : io.out)(command?.help ?? usage);
    return name === undefined && !values.help ? ExitCode.cannotRun : ExitCode.ok;
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) {
    io.err(`kubectl gitops: unknown command '${name}'; commands: ${Object.keys(commands).join(', ')}`);
    return ExitCode.cannotRun;
  }
  const ctx = createContext({ env, kubeconfigPath: values.kubeconfig, contextName: values.context });
  secrets = () => ctx.secrets();
  // Unfiltered: it prints only the credential a command has just issued (an exact-value filter would mangle it
  // wherever a configured secret is a common word, e.g. a local database's password "postgres").
  const revealOnce = (text: string) => rawIo.out(text);
  try {
    return await command.run({ args: rest, options: values, format, ctx, io, revealOnce });
  } catch (err) {
    if (err instanceof CliError) {
      io.err(`kubectl gitops ${name}: ${err.message}`);
      return err.exitCode;
    }
    io.err(`kubectl gitops ${name}: unexpected error: ${(err as Error)?.message ?? String(err)}`);
    if (env.GITOPS_CLI_DEBUG === '1' && err instanceof Error && err.stack) io.err(err.stack);
    else io.err('(GITOPS_CLI_DEBUG=1 prints the stack trace)');
    return ExitCode.failed;
  } finally {
    await ctx.close();
  }
}
