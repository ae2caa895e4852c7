/** @gitops/cli: the admin CLI (`kubectl gitops ...`); docs/admin-cli.md. */
export { type RunOptions, runCli, usage } from './cli.ts';
export { CliError, ExitCode } from './context.ts';
