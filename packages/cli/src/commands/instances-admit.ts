/**
 * The database side of an engine instance, for `kubectl gitops instances` (instances.ts):
 * `instances admit <name> --namespace <argocd-namespace> [--secret <name>]` (its own database role with a new
 * password, and the agent's connection string printed once or written into a Secret) and
 * `instances rotate-key <name>` (a new key pair asked of its agent).
 */
import { FieldManager } from '@gitops/api';
import {
  type AdmittedEngineInstance,
  admitEngineInstance,
  agentDatabaseUrl,
  type Db,
  requestInstanceKeyRotation,
} from '@gitops/db';
import { KubeApiError, type KubeConfig, serverSideApply, TerminalError } from '@gitops/shared';
import type { CommandInput } from '../command.ts';
import { CliError, ExitCode } from '../context.ts';
import { formatStructured, isStructured } from '../output.ts';

const ADMIT_USAGE =
  'usage: kubectl gitops instances admit <name> --namespace <argocd-namespace> [--secret <name> [--secret-namespace <namespace>]]';
/**
 * The key of the agent's Secret the connection string goes under, as in the backend's `gitops-service-database`
 * (manifests/base/deployments.yaml: the agent's DATABASE_URL comes from `gitops-service-agent-database`'s `url`).
 */
const SECRET_KEY = 'url';
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * `instances admit <name> --namespace <argocd-namespace> [--secret <name>]`: admits the instance with the CLI's
 * database connection (the backend's role, which may create roles) and gives the operator the agent's
 * connection string: printed once (through `revealOnce`, the only unscrubbed line), or with --secret written
 * into that Secret of the instance's namespace (server-side apply) and never shown. Every run issues a new
 * password: the old one stops working for new connections.
 */
export async function admit({ args, options, format, ctx, io, revealOnce }: CommandInput): Promise<number> {
  const [name, ...extra] = args;
  const namespace = options.namespace;
  if (!name || extra.length > 0 || namespace === undefined) throw new CliError(ADMIT_USAGE);
  if (options['all-namespaces']) throw new CliError(`-A does not go with admit: ${ADMIT_USAGE}`);
  if (options.wait) throw new CliError('--wait goes with cordon, uncordon, drain and undrain');
  if (namespace.length > 63 || !DNS_LABEL.test(namespace)) {
    throw new CliError(`--namespace '${namespace}' is not a namespace name (a DNS-1123 label)`);
  }
  const secretName = options.secret;
  if (secretName !== undefined && (secretName.length > 253 || !DNS_SUBDOMAIN.test(secretName))) {
    throw new CliError(`--secret '${secretName}' is not a Secret name (a DNS-1123 subdomain)`);
  }
  const db = await ctx.db();
  // The agent's Pod reads it: in the agent's namespace (gitops-service in manifests/base), else the instance's.
  const secretNamespace = options['secret-namespace'] ?? namespace;
  if (secretNamespace.length > 63 || !DNS_LABEL.test(secretNamespace)) {
    throw new CliError(`--secret-namespace '${secretNamespace}' is not a namespace name (a DNS-1123 label)`);
  }
  if (options['secret-namespace'] !== undefined && secretName === undefined) {
    throw new CliError(`--secret-namespace goes with --secret: ${ADMIT_USAGE}`);
  }
  const secret = secretName === undefined ? undefined : { namespace: secretNamespace, name: secretName };
  let kc: KubeConfig | undefined;
  if (secret) {
    kc = await ctx.kube();
    // Before a new password is issued (which ends the old one): the Secret can be written (its namespace
    // exists, we may write Secrets there). A dry run of the same apply, with a placeholder.
    await writeSecret(kc, secret, 'postgres://placeholder', { dryRun: true }).catch((err: unknown) => {
      throw secretError(secret, err, 'nothing was changed');
    });
  }
  const admitted = await admitInstance(db, name, namespace);
  const databaseUrl = agentDatabaseUrl(ctx.databaseUrl(), admitted);
  const again = 'running admit again issues a new password (the old one stops working for new connections)';

  if (!secret || !kc) {
    if (isStructured(format)) {
      revealOnce(formatStructured(format, { name, role: admitted.role, databaseUrl }));
    } else {
      io.out(admittedLine(name, namespace, admitted));
      revealOnce(`DATABASE_URL=${databaseUrl}`);
      io.out(
        `store it as the agent's DATABASE_URL (manifests/base: Secret gitops-service-agent-database, key ${SECRET_KEY}): it is not shown again; ${again}`,
      );
      io.out(
        `to write it into the Secret without showing it: kubectl gitops instances admit ${name} --namespace ${namespace} --secret <name>`,
      );
    }
    ctx.addSecret(admitted.password);
    return ExitCode.ok;
  }

  // From here no line may hold the password, whatever an error message quotes.
  ctx.addSecret(admitted.password);
  ctx.addSecret(databaseUrl);
  await writeSecret(kc, secret, databaseUrl).catch((err: unknown) => {
    throw secretError(
      secret,
      err,
      `the role ${admitted.role} already has a new password (the old one no longer logs in): run admit again`,
    );
  });
  if (isStructured(format)) {
    io.out(formatStructured(format, { name, role: admitted.role, secret }));
    return ExitCode.ok;
  }
  io.out(admittedLine(name, namespace, admitted));
  io.out(
    `secret/${secret.name} in namespace ${secret.namespace}: ${SECRET_KEY} written (server-side apply, field manager ${FieldManager.Cli})`,
  );
  io.out(`the instance's agents use it when they start again (restart them); ${again}`);
  return ExitCode.ok;
}

/**
 * `instances rotate-key <name>`: asks the instance's agent for a new key pair (docs/engine-instances.md). The agent
 * makes it within seconds, keeps the old private key, and publishes the new public key; the backend re-seals
 * everything the instance needs with it, then the agent drops the old key. Nothing stops meanwhile.
 */
export async function rotateKey({ args, options, format, ctx, io }: CommandInput): Promise<number> {
  const [name, ...extra] = args;
  if (!name || extra.length > 0) throw new CliError('usage: kubectl gitops instances rotate-key <name>');
  if (options.wait) throw new CliError('--wait goes with cordon, uncordon, drain and undrain');
  const db = await ctx.db();
  if (!(await requestInstanceKeyRotation(db, name))) {
    throw new CliError(
      `no engine instance ${name} is registered (kubectl gitops instances lists them)`,
      ExitCode.failed,
    );
  }
  if (isStructured(format)) {
    io.out(formatStructured(format, { name, rotationRequested: true }));
    return ExitCode.ok;
  }
  io.out(`engine instance ${name}: a new key is asked for; its agent makes and publishes it within seconds`);
  io.out(
    'the backend then re-seals what the instance needs with it, and the agent drops the old key once nothing uses it; follow with: kubectl gitops instances -o wide (KEY)',
  );
  return ExitCode.ok;
}

function admittedLine(name: string, namespace: string, admitted: AdmittedEngineInstance): string {
  return `engine instance ${name} (Argo CD namespace ${namespace}) admitted: database role ${admitted.role}, with a new password`;
}

async function admitInstance(db: Db, name: string, namespace: string): Promise<AdmittedEngineInstance> {
  try {
    return await admitEngineInstance(db, { name, namespaceName: namespace });
  } catch (err) {
    // Registered for another namespace: the message names both.
    if (err instanceof TerminalError) throw new CliError(err.message, ExitCode.failed);
    if ((err as { code?: unknown }).code === '42501') {
      throw new CliError(
        `the database role of DATABASE_URL may not create or alter roles (it needs CREATEROLE, as the backend's role has): ${(err as Error).message}`,
        ExitCode.failed,
      );
    }
    throw err;
  }
}

/** Server-side apply of the Secret's one key (forced: the operator means to replace the value). */
async function writeSecret(
  kc: KubeConfig,
  secret: { namespace: string; name: string },
  databaseUrl: string,
  options: { dryRun?: boolean } = {},
): Promise<void> {
  await serverSideApply(
    kc,
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: secret.name, namespace: secret.namespace },
      data: { [SECRET_KEY]: Buffer.from(databaseUrl).toString('base64') },
    },
    { fieldManager: FieldManager.Cli, force: true, dryRun: options.dryRun },
  );
}

function secretError(secret: { namespace: string; name: string }, err: unknown, then: string): CliError {
  // The API server answered (no such namespace, forbidden, invalid): a problem found; else it is unreachable.
  const answered = err instanceof KubeApiError && err.statusCode !== 0;
  return new CliError(
    `cannot write Secret ${secret.namespace}/${secret.name}: ${(err as Error)?.message ?? String(err)}; ${then}`,
    answered ? ExitCode.failed : ExitCode.cannotRun,
  );
}
