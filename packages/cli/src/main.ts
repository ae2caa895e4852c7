/**
 * `kubectl gitops ...` (bin/kubectl-gitops), `pnpm gitops -- ...`, `node packages/cli/src/main.ts ...`: the
 * admin CLI's process. See cli.ts and docs/admin-cli.md.
 */
import { runCli } from './cli.ts';

const code = await runCli(process.argv.slice(2), {
  env: process.env,
  io: {
    out: (text) => process.stdout.write(`${text}\n`),
    err: (text) => process.stderr.write(`${text}\n`),
  },
});
// Pipes and files are written synchronously on Linux; exit without waiting for idle keep-alive sockets.
process.stdout.write('', () => process.exit(code));
