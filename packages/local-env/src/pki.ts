import { execFile } from 'node:child_process';
import { access, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** Certificates of a control plane in cluster mode, made once with `openssl` and kept in `<workDir>/pki`. */
export interface ClusterPki {
  dir: string;
  caCert: string;
  caKey: string;
  /** The API server's serving certificate (SANs: loopback, the node network's gateway, the `kubernetes` Service). */
  apiServerCert: string;
  apiServerKey: string;
  /** The client certificate the API server presents to the kubelet (group system:masters). */
  kubeletClientCert: string;
  kubeletClientKey: string;
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

async function openssl(args: string[], cwd: string): Promise<void> {
  try {
    await execFileAsync('openssl', args, { cwd });
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`openssl ${args[0]} failed: ${stderr.trim() || String(error)}`);
  }
}

async function signed(
  pki: { dir: string; caCert: string; caKey: string },
  name: string,
  subject: string,
  extensions: string,
): Promise<{ cert: string; key: string }> {
  const cert = join(pki.dir, `${name}.crt`);
  const key = join(pki.dir, `${name}.key`);
  if (await exists(cert)) return { cert, key };
  const ext = join(pki.dir, `${name}.ext`);
  await writeFile(ext, extensions);
  await openssl(['genrsa', '-out', key, '2048'], pki.dir);
  await openssl(
    ['req', '-new', '-key', key, '-subj', subject, '-out', join(pki.dir, `${name}.csr`)],
    pki.dir,
  );
  await openssl(
    [
      'x509',
      '-req',
      '-in',
      join(pki.dir, `${name}.csr`),
      '-CA',
      pki.caCert,
      '-CAkey',
      pki.caKey,
      '-CAcreateserial',
      '-days',
      '3650',
      '-extfile',
      ext,
      '-out',
      cert,
    ],
    pki.dir,
  );
  return { cert, key };
}

/** Creates (or reuses) the CA, the API server's serving certificate and the kubelet client certificate. */
export async function ensureClusterPki(workDir: string, serverIps: string[]): Promise<ClusterPki> {
  const dir = join(workDir, 'pki');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const caCert = join(dir, 'ca.crt');
  const caKey = join(dir, 'ca.key');
  if (!(await exists(caCert))) {
    await openssl(['genrsa', '-out', caKey, '2048'], dir);
    await openssl(
      [
        'req',
        '-x509',
        '-new',
        '-key',
        caKey,
        '-subj',
        '/CN=gitops-local-ca',
        '-days',
        '3650',
        '-out',
        caCert,
      ],
      dir,
    );
  }
  const sans = [
    'DNS:localhost',
    'DNS:kubernetes',
    'DNS:kubernetes.default',
    'DNS:kubernetes.default.svc',
    'DNS:kubernetes.default.svc.cluster.local',
    ...['127.0.0.1', '10.0.0.1', ...serverIps].map((ip) => `IP:${ip}`),
  ];
  const server = await signed(
    { dir, caCert, caKey },
    'apiserver',
    '/CN=kube-apiserver',
    `basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=${sans.join(',')}\n`,
  );
  const kubeletClient = await signed(
    { dir, caCert, caKey },
    'kubelet-client',
    '/O=system:masters/CN=kube-apiserver-kubelet-client',
    'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n',
  );
  return {
    dir,
    caCert,
    caKey,
    apiServerCert: server.cert,
    apiServerKey: server.key,
    kubeletClientCert: kubeletClient.cert,
    kubeletClientKey: kubeletClient.key,
  };
}

/**
 * A self-signed serving certificate for `host` (an IP address), valid two days, written to `<dir>/cert.pem`
 * and `<dir>/key.pem`: what a test's local HTTPS server (Git, an OCI registry) presents and its clients trust.
 */
export async function selfSignedCertificate(
  dir: string,
  host: string,
): Promise<{ cert: string; key: string }> {
  const key = join(dir, 'key.pem');
  const cert = join(dir, 'cert.pem');
  await openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '2',
      '-subj',
      `/CN=${host}`,
      '-addext',
      `subjectAltName=IP:${host}`,
    ],
    dir,
  );
  return { cert, key };
}
