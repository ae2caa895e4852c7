/**
 * A local Git SSH server for tests: an SSH server in this process (the `ssh2` library; no sshd needed) that
 * runs Debian's `git-upload-pack` / `git-receive-pack` over the bare repositories of a folder (for example
 * git-server.ts's `reposDir`, so one repository is reachable over HTTPS and SSH). Public-key authentication
 * only, against the keys `authorize` was given; each key may read and push. Its host key is fresh per start:
 * clients trust it through `knownHostsLine` (or accept it on first use).
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import ssh2 from 'ssh2';

const exec = promisify(execFile);

export interface GitSshServer {
  /** `ssh://git@127.0.0.1:<port>/<name>.git` */
  url(name: string): string;
  /** The host's line for an ssh known_hosts file (`[127.0.0.1]:<port> ssh-ed25519 AAAA...`). */
  readonly knownHostsLine: string;
  /** Lets the holder of this OpenSSH public key (`ssh-ed25519 AAAA...`) read and push. */
  authorize(publicKey: string): void;
  /** Logins refused and accepted so far, for assertions. */
  readonly logins: { accepted: number; refused: number };
  stop(): Promise<void>;
}

/** A fresh ed25519 key pair in OpenSSH formats (`ssh-keygen`). */
export async function generateSshKey(): Promise<{ privateKey: string; publicKey: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'ssh-key-'));
  try {
    const file = join(dir, 'id');
    await exec('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'test', '-f', file]);
    return {
      privateKey: await readFile(file, 'utf8'),
      publicKey: (await readFile(`${file}.pub`, 'utf8')).trim(),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const COMMAND = /^(git-upload-pack|git-receive-pack) '?\/?([A-Za-z0-9._-]+\.git)'?$/;

export async function startGitSshServer(options: { reposDir: string }): Promise<GitSshServer> {
  const hostKey = await generateSshKey();
  const authorized: ssh2.ParsedKey[] = [];
  const logins = { accepted: 0, refused: 0 };
  const server = new ssh2.Server({ hostKeys: [hostKey.privateKey] }, (client) => {
    client.on('authentication', (ctx) => {
      const key =
        ctx.method === 'publickey'
          ? authorized.find((k) => k.type === ctx.key.algo && k.getPublicSSH().equals(ctx.key.data))
          : undefined;
      if (!key || ctx.method !== 'publickey') {
        if (ctx.method !== 'none') logins.refused++;
        ctx.reject(['publickey']);
        return;
      }
      // Without a signature the client only asks whether the key would do.
      if (!ctx.signature || !ctx.blob) {
        ctx.accept();
        return;
      }
      if (key.verify(ctx.blob, ctx.signature, ctx.hashAlgo) === true) {
        logins.accepted++;
        ctx.accept();
      } else {
        logins.refused++;
        ctx.reject(['publickey']);
      }
    });
    client.on('ready', () => {
      client.on('session', (acceptSession) => {
        const session = acceptSession();
        const env: Record<string, string> = {};
        session.on('env', (accept, _reject, info) => {
          if (info.key === 'GIT_PROTOCOL') env.GIT_PROTOCOL = info.val;
          accept?.();
        });
        session.on('exec', (accept, reject, info) => {
          const match = COMMAND.exec(info.command);
          if (!match) {
            reject?.();
            return;
          }
          const stream = accept();
          const child = spawn(match[1] ?? '', [join(options.reposDir, match[2] ?? '')], {
            env: { PATH: process.env.PATH, ...env },
          });
          stream.pipe(child.stdin);
          child.stdout.pipe(stream, { end: false });
          child.stderr.pipe(stream.stderr, { end: false });
          child.on('close', (code) => {
            stream.exit(code ?? 1);
            stream.end();
          });
          child.on('error', () => stream.close());
        });
      });
    });
    client.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const [type, blob] = hostKey.publicKey.split(' ');
  return {
    url: (name) => `ssh://git@127.0.0.1:${port}/${name}.git`,
    knownHostsLine: `[127.0.0.1]:${port} ${type} ${blob}`,
    logins,
    authorize(publicKey) {
      const parsed = ssh2.utils.parseKey(publicKey);
      if (parsed instanceof Error) throw parsed;
      authorized.push(Array.isArray(parsed) ? parsed[0] : parsed);
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
