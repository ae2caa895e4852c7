import type { Context } from './context.ts';
import type { Io, OutputFormat } from './output.ts';

/** The options the CLI knows (node:util parseArgs); each command says which of them it takes. */
export interface Options {
  /** Options of every command, kubectl's (docs/admin-cli.md#options-of-every-command). */
  output?: string;
  kubeconfig?: string;
  context?: string;
  namespace?: string;
  'all-namespaces'?: boolean;
  help?: boolean;
  /** Options of one command. */
  stuck?: string;
  failed?: boolean;
  instance?: string;
  'all-failed'?: boolean;
  batch?: string;
  'dry-run'?: boolean;
  wait?: boolean;
  secret?: string;
  'secret-namespace'?: string;
}

export interface CommandInput {
  /** The positional arguments after the command's name (and its subcommand's). */
  args: string[];
  options: Options;
  format: OutputFormat;
  ctx: Context;
  io: Io;
  /**
   * Writes to stdout without the secret filter `io.out` applies: only for the one credential a command issues
   * to be shown once (`instances admit`: the agent's connection string). Nothing else goes through it.
   */
  revealOnce: (text: string) => void;
}

/** Runs one command; resolves to its exit code. Expected errors are thrown as CliError. */
export type Command = (input: CommandInput) => Promise<number>;
