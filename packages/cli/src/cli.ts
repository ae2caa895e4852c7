/**
 * The admin CLI (`kubectl gitops ...`, docs/admin-cli.md): parses the command line with node:util's parseArgs,
 * runs one command, and maps errors to exit codes: 0 done, 1 the command found a problem, 2 it could not run
 * (bad arguments, missing configuration, database or API server unreachable). Expected errors are one line
 * without a stack trace; every line printed goes through the secret filter (output.ts).
 */
import { parseArgs } from 'node:util';
import type { Command, Options } from './command.ts';
import { doctor } from './commands/doctor.ts';
import { instances } from './commands/instances.ts';
import { operations } from './commands/operations.ts';
import { reseal } from './commands/reseal.ts';
import { status } from './commands/status.ts';
import { CliError, createContext, ExitCode } from './context.ts';
import { type Io, type OutputFormat, redactingWriter } from './output.ts';

const commands: Record<string, { run: Command; options: (keyof Options)[]; help: string }> = {
  status: {
    run: status,
    options: [],
    help: `kubectl gitops status <namespace>
  A tenant's GitOpsDeployments: sync, health, engine instance, ErrorOccurred, and the latest operation of
  each (state, age, message). Reads the objects from the API server and the rows from the database.`,
  },
  operations: {
    run: operations,
    options: ['stuck', 'failed', 'instance', 'all-failed'],
    help: `kubectl gitops operations [--stuck=<duration>] [--failed] [--instance <name>]
  Operations Waiting or In_Progress for longer than --stuck (default 5m) and Failed ones (both without a
  flag), with resource, instance, owner, attempts, message and whether an agent of the instance listens.
kubectl gitops operations retry <id>... | --all-failed [--instance <name>]
  Puts Failed operations back to Waiting, due now (a Waiting one becomes due now); the agent takes them.`,
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
    options: ['wait'],
    help: `kubectl gitops instances
  Every engine instance: namespace, cluster, agents, listening, tenants, applications, cordoned, drain.
kubectl gitops instances cordon|uncordon|drain|undrain <name> [--wait]
  Sets spec.cordoned / spec.drain of its GitOpsEngineInstance (the backend applies it); --wait waits up to
  60 s until the backend has taken it.`,
  },
};

const globalOptions: (keyof Options)[] = ['output', 'kubeconfig', 'help'];

export const usage = `kubectl gitops: the GitOps Service's admin CLI (docs/admin-cli.md)

Commands:
${Object.values(commands)
  .map((c) => c.help)
  .join('\n')}

Options of every command:
  -o, --output table|wide|json   output format (default table; wide does not shorten messages)
  --kubeconfig <file>            instead of KUBECONFIG
  -h, --help                     this help

Configuration (as the backend takes it): DATABASE_URL, KUBECONFIG, GITOPS_ENCRYPTION_KEYS (reseal, doctor).
Exit codes: 0 done, 1 the command found a problem, 2 it could not run (arguments, configuration, connection).`;

export interface RunOptions {
  env: Readonly<Record<string, string | undefined>>;
  io: Io;
}

/** Runs the CLI with `argv` (without node and the script); resolves to the exit code. */
export async function runCli(argv: readonly string[], { env, io: rawIo }: RunOptions): Promise<number> {
  // `pnpm gitops -- status x` passes the `--` along.
  const args = argv[0] === '--' ? argv.slice(1) : [...argv];
  let secrets: () => readonly string[] = () => [];
  const io: Io = {
    out: redactingWriter(rawIo.out, () => secrets()),
    err: redactingWriter(rawIo.err, () => secrets()),
  };
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(args);
  } catch (err) {
    io.err(`kubectl gitops: ${(err as Error).message}`);
    io.err("run 'kubectl gitops --help' for the commands");
    return ExitCode.cannotRun;
  }
  const { values, positionals } = parsed;
  const [name, ...rest] = positionals;
  if (values.help || name === undefined || name === 'help') {
    const command = name === 'help' ? commands[rest[0] ?? ''] : name ? commands[name] : undefined;
    (name === undefined && !values.help ? io.err : io.out)(command?.help ?? usage);
    return name === undefined && !values.help ? ExitCode.cannotRun : ExitCode.ok;
  }
  const command = commands[name];
  if (!command) {
    io.err(`kubectl gitops: unknown command '${name}'; commands: ${Object.keys(commands).join(', ')}`);
    return ExitCode.cannotRun;
  }
  const given = Object.keys(values) as (keyof Options)[];
  const foreign = given.filter((o) => !globalOptions.includes(o) && !command.options.includes(o));
  if (foreign.length > 0) {
    io.err(`kubectl gitops ${name}: does not take --${foreign.join(', --')}\n${command.help}`);
    return ExitCode.cannotRun;
  }
  const format = (values.output ?? 'table') as OutputFormat;
  if (!['table', 'wide', 'json'].includes(format)) {
    io.err(`kubectl gitops: --output must be table, wide or json (got "${values.output}")`);
    return ExitCode.cannotRun;
  }
  const ctx = createContext({ env, kubeconfigPath: values.kubeconfig });
  secrets = () => ctx.secrets();
  try {
    return await command.run({ args: rest, options: values, format, ctx, io });
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

function parse(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    strict: true,
    options: {
      output: { type: 'string', short: 'o' },
      kubeconfig: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      stuck: { type: 'string' },
      failed: { type: 'boolean' },
      instance: { type: 'string' },
      'all-failed': { type: 'boolean' },
      batch: { type: 'string' },
      'dry-run': { type: 'boolean' },
      wait: { type: 'boolean' },
    },
  });
}
