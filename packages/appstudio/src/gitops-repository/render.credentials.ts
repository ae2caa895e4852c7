/**
 * The tenant's credentials for a GitOps repository the render pushes to: the namespace's
 * RepositoryCredential of that repository (URLs compared without user info, case, trailing `/` and `.git`),
 * and the Secret it names (an SSH private key, else a username and password).
 */
import { CoreKinds, Kinds, SecretKey } from '@gitops/api';
import {
  collectionPath,
  getObject,
  HttpMethod,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
} from '@gitops/shared';
import { list, record, specOf, text } from '../objects.ts';
import { type GitCredentials, withoutUserInfo } from './git.ts';
import { RenderProblem } from './render.status.ts';

function decode(value: unknown): string | undefined {
  return typeof value === 'string' ? Buffer.from(value, 'base64').toString('utf8') : undefined;
}

const normalizeUrl = (url: string) => {
  let u = url.trim().toLowerCase();
  while (u.endsWith('/')) u = u.slice(0, -1);
  return u.endsWith('.git') ? u.slice(0, -4) : u;
};

/** The tenant's credentials for `url`: its RepositoryCredential of that repository, and the Secret it names. */
export async function credentialsFor(
  kc: KubeConfig,
  namespace: string,
  url: string,
): Promise<GitCredentials> {
  const answer = record(
    await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: collectionPath({ ...Kinds.GitOpsDeploymentRepositoryCredential.resource, namespace }),
    }),
  );
  const wanted = normalizeUrl(withoutUserInfo(url));
  const credential = list(answer.items)
    .map((i) => i as KubeObject)
    .find((c) => normalizeUrl(withoutUserInfo(text(specOf(c).repository) || text(specOf(c).url))) === wanted);
  if (!credential) return {};
  const secretName = text(specOf(credential).secret);
  const secret = secretName
    ? await getObject(kc, { ...CoreKinds.Secret, namespace, name: secretName })
    : undefined;
  if (!secret)
    throw new RenderProblem(
      `the RepositoryCredential ${credential.metadata.name} of the GitOps repository names Secret '${secretName}', which does not exist`,
    );
  const data = record(secret.data);
  const sshPrivateKey = decode(data[SecretKey.SshPrivateKey]);
  if (sshPrivateKey?.trim()) return { sshPrivateKey };
  return { username: decode(data[SecretKey.Username]), password: decode(data[SecretKey.Password]) };
}
