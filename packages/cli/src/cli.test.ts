/**
 * The command line as kubectl users type it (parseCommandLine, and runCli for its refusals, both in-process and
 * without PostgreSQL or an API server), `--context` selecting a context of a kubeconfig file, and `-o yaml`.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseCommandLine, runCli, UsageError } from './cli.ts';
import { CliError, createContext } from './context.ts';
import { formatStructured } from './output.ts';

/** The UsageError a command line is refused with. */
function refusal(args: string[]): UsageError {
  try {
    parseCommandLine(args);
  } catch (err) {
    assert.ok(err instanceof UsageError, String(err));
    return err;
  }
  assert.fail(`${args.join(' ')} was accepted`);
}

async function run(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, {
    env: {},
    io: { out: (text) => out.push(text), err: (text) => err.push(text) },
  });
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}

describe('the command line', () => {
  test("-n/--namespace in kubectl's spellings, before or after the command", () => {
    for (const args of [
      ['status', '-n', 'jane'],
      ['status', '-njane'],
      ['status', '-n=jane'],
      ['status', '--namespace', 'jane'],
      ['status', '--namespace=jane'],
      ['-n', 'jane', 'status'],
      ['--', 'status', '-n', 'jane'],
    ]) {
      const line = parseCommandLine(args);
      assert.equal(line.name, 'status', args.join(' '));
      assert.deepEqual(line.args, [], args.join(' '));
      assert.equal(line.options.namespace, 'jane', args.join(' '));
      assert.equal(line.format, 'table');
    }
    assert.deepEqual(parseCommandLine(['status', 'jane']).args, ['jane']);
  });

  test('-A/--all-namespaces, -o/--output json|yaml|wide, --kubeconfig and --context on every command', () => {
    assert.equal(parseCommandLine(['status', '-A']).options['all-namespaces'], true);
    assert.equal(parseCommandLine(['operations', '--all-namespaces']).options['all-namespaces'], true);
    const combined = parseCommandLine(['status', '-Ao', 'yaml']);
    assert.equal(combined.options['all-namespaces'], true);
    assert.equal(combined.format, 'yaml');
    for (const [args, format] of [
      [['status', 'x', '-o', 'json'], 'json'],
      [['status', 'x', '-o=yaml'], 'yaml'],
      [['status', 'x', '--output=wide'], 'wide'],
      [['status', 'x', '-owide'], 'wide'],
      [['status', 'x'], 'table'],
    ] as const) {
      assert.equal(parseCommandLine([...args]).format, format, args.join(' '));
    }
    for (const command of ['status', 'operations', 'reseal', 'doctor', 'instances']) {
      const line = parseCommandLine([
        command,
        '--kubeconfig',
        '/tmp/kc',
        '--context',
        'prod',
        '-n',
        'x',
        '-o',
        'yaml',
      ]);
      assert.equal(line.name, command);
      assert.equal(line.options.kubeconfig, '/tmp/kc');
      assert.equal(line.options.context, 'prod');
      assert.equal(line.options.namespace, 'x');
      assert.equal(line.format, 'yaml');
    }
    const admit = parseCommandLine(['instances', 'admit', 'i2', '--namespace', 'argocd-2', '--secret', 's']);
    assert.deepEqual(admit.args, ['admit', 'i2']);
    assert.equal(admit.options.secret, 's');
  });

  test('an unknown option is refused naming it, with the help of the command', () => {
    const long = refusal(['status', 'jane', '--bogus']);
    assert.equal(long.message, "unknown option '--bogus'");
    assert.equal(long.command, 'status');
    assert.match(long.help, /^kubectl gitops status /);
    assert.equal(refusal(['-x', 'doctor']).message, "unknown option '-x'");
    assert.equal(refusal(['--bogus']).command, undefined);
  });

  test("a command's option on another command, a bad -o, -n with -A, an empty value are refused", () => {
    assert.equal(refusal(['reseal', '--stuck=1m']).message, 'does not take --stuck');
    assert.equal(refusal(['status', '--secret', 's']).message, 'does not take --secret');
    assert.match(refusal(['status', 'x', '-o', 'xml']).message, /--output must be table, wide, json, yaml/);
    assert.match(refusal(['status', '-n', 'x', '-A']).message, /give one of them/);
    assert.match(refusal(['status', '--context=']).message, /--context needs a value/);
    assert.match(refusal(['status', '-n']).message, /argument missing/);
  });

  test('runCli: a refused line is exit code 2, one line naming the option, then the help; nothing on stdout', async () => {
    const unknown = await run(['status', '-n', 'jane', '--bogus']);
    assert.equal(unknown.code, 2);
    assert.equal(unknown.stdout, '');
    assert.match(unknown.stderr, /^kubectl gitops status: unknown option '--bogus'\nkubectl gitops status /);
    const foreign = await run(['reseal', '--stuck=1m']);
    assert.match(foreign.stderr, /^kubectl gitops reseal: does not take --stuck/);
    const help = await run(['--help']);
    assert.equal(help.code, 0);
    for (const option of [
      '-n, --namespace',
      '-A, --all-namespaces',
      '-o, --output',
      '--kubeconfig',
      '--context',
    ]) {
      assert.ok(help.stdout.includes(option), option);
    }
    assert.match(
      help.stdout,
      /instances admit <name> --namespace <argocd-namespace> \[--secret <name> \[--secret-namespace <ns>\]\]/,
    );
    assert.match(help.stdout, /instances rotate-key <name>/);
  });
});

describe('--context', () => {
  let dir: string;
  let kubeconfig: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cli-context-'));
    kubeconfig = join(dir, 'kubeconfig');
    await writeFile(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'dev',
        clusters: [
          { name: 'dev-cluster', cluster: { server: 'https://dev.example:6443' } },
          { name: 'prod-cluster', cluster: { server: 'https://prod.example:6443' } },
        ],
        users: [{ name: 'someone', user: { token: 'not-a-real-token' } }],
        contexts: [
          { name: 'dev', context: { cluster: 'dev-cluster', user: 'someone' } },
          { name: 'prod', context: { cluster: 'prod-cluster', user: 'someone', namespace: 'team-a' } },
        ],
      }),
    );
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test("selects that context's cluster and namespace; without it, the current context's", () => {
    const chosen = createContext({ env: {}, kubeconfigPath: kubeconfig, contextName: 'prod' });
    assert.equal(chosen.apiServer(), 'https://prod.example:6443');
    assert.equal(chosen.contextNamespace(), 'team-a');
    const current = createContext({ env: { KUBECONFIG: kubeconfig } });
    assert.equal(current.apiServer(), 'https://dev.example:6443');
    assert.equal(current.contextNamespace(), undefined);
  });

  test('an unknown context is a CliError naming it and the contexts there are', () => {
    const ctx = createContext({ env: { KUBECONFIG: kubeconfig }, contextName: 'staging' });
    assert.throws(
      () => ctx.kubeConfig(),
      (err: unknown) =>
        err instanceof CliError &&
        err.exitCode === 2 &&
        /^--context staging: kubeconfig .* has no context "staging" \(it has: dev, prod\) \(KUBECONFIG\)$/.test(
          err.message,
        ),
    );
  });
});

describe('-o yaml', () => {
  test('the same fields as -o json', () => {
    const value = {
      namespace: 'jane',
      tenant: { placedOn: 'default' },
      deployments: [{ name: 'a', error: null }],
    };
    assert.deepEqual(parseYaml(formatStructured('yaml', value)), value);
    assert.deepEqual(JSON.parse(formatStructured('json', value)), value);
  });
});
