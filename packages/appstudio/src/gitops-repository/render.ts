/**
 * The pure parts of rendering a Snapshot into a GitOps repository (README: "GitOps repository rendering"):
 * where a component's manifests live, what the environment's overlay says about its image and environment
 * variables, and the commit message.
 */
import { isMap, isSeq, parseDocument, YAMLSeq } from 'yaml';
import { record, specOf, text } from '../objects.ts';

/**
 * The Application annotation that asks this service to render the Application's GitOps repository. Without
 * it nothing is rendered, so an installation where App Studio's own application service writes
 * `status.components` is never in its way.
 */
export const RENDER_ANNOTATION = 'managed-gitops.redhat.com/render-gitops-repository';

/**
 * The condition this service writes into a binding's `status.gitopsRepoConditions` (App Studio's own type and
 * reasons; the refusal reasons are ours).
 */
export const RepoCondition = {
  type: 'GitOpsResourcesGenerated',
  success: 'GenerateSuccess',
  /** A failure that may go away by itself or is about the binding's input (retried). */
  error: 'GenerateError',
  /** The server refused the push: a protected branch, a hook, no write access (403). */
  pushRefused: 'PushRefused',
  /** The server refused the credentials (401, an SSH key it does not know). */
  credentialsRefused: 'CredentialsRefused',
  /** The SSH server's host key is not one of the configured known hosts. */
  hostKeyNotTrusted: 'HostKeyNotTrusted',
} as const;

/**
 * The reasons of a refusal that only someone changing the repository's settings, the credentials or the
 * known hosts can end: a PromotionRun waiting for such a render ends in Failure at once (the binding itself
 * keeps trying, so a fixed permission converges).
 */
export const REFUSAL_REASONS: ReadonlySet<string> = new Set([
  RepoCondition.pushRefused,
  RepoCondition.credentialsRefused,
  RepoCondition.hostKeyNotTrusted,
]);

export interface GitOpsRepository {
  readonly url: string;
  readonly branch: string;
  /** The folder of `components/` in the repository ('' for the top). */
  readonly context: string;
}

/**
 * The GitOps repository an Application asks us to render (`spec.gitOpsRepository` {url, branch, context},
 * App Studio's fields), or why not: `undefined` when it does not ask (no annotation `"true"`).
 */
export function gitOpsRepositoryOf(application: {
  metadata: { annotations?: Record<string, string> };
}): GitOpsRepository | string | undefined {
  if (application.metadata.annotations?.[RENDER_ANNOTATION] !== 'true') return undefined;
  const repo = record(specOf(application as never).gitOpsRepository);
  const url = text(repo.url).trim();
  if (!url)
    return `the Application has ${RENDER_ANNOTATION}: "true" but no spec.gitOpsRepository.url to render into`;
  const context = text(repo.context)
    .trim()
    .replace(/^\.?\/+/, '')
    .replace(/\/+$/, '');
  if (context.split('/').includes('..'))
    return `spec.gitOpsRepository.context must stay inside the repository`;
  return { url, branch: text(repo.branch).trim() || 'main', context: context === '.' ? '' : context };
}

const join = (...parts: string[]) => parts.filter((p) => p !== '').join('/');

export const basePath = (repo: GitOpsRepository, component: string) =>
  join(repo.context, 'components', component, 'base');

export const overlayPath = (repo: GitOpsRepository, component: string, environment: string) =>
  join(repo.context, 'components', component, 'overlays', environment);

/** A container image reference split for kustomize's `images` field. */
export interface ImageReference {
  /** The repository, without tag or digest: what the base's containers name. */
  readonly name: string;
  readonly tag?: string;
  readonly digest?: string;
}

/** `registry/ns/web:1.2@sha256:ab` → {name: registry/ns/web, tag: 1.2, digest: sha256:ab}. */
export function parseImage(image: string): ImageReference {
  let rest = image.trim();
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
  }
  let tag: string | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
  }
  return { name: rest, ...(tag ? { tag } : {}), ...(digest ? { digest } : {}) };
}

/** The name of the configMapGenerator entry through which an overlay takes the Environment's variables. */
export const environmentConfigMapName = (component: string) => `${component}-environment`;

/**
 * The overlay's kustomization.yaml after the render: `resources` defaults to the base; the `images` entry
 * of the image's repository deploys the image (by digest when the reference has one, else by tag; nothing
 * else in the file changes); where the overlay has a configMapGenerator entry named
 * `<component>-environment` (that is how an overlay supports it), its literals become the Environment's
 * `configuration.env`. `existing` is the file's current text, or undefined when there is none.
 */
export function renderOverlay(
  existing: string | undefined,
  input: { component: string; image: string; env: readonly { name: string; value: string }[] },
): string {
  const doc = parseDocument(
    existing ??
      'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../base\n',
  );
  if (!isMap(doc.contents)) return renderOverlay(undefined, input);
  const image = parseImage(input.image);
  const entry: Record<string, string> = { name: image.name };
  if (image.digest) entry.digest = image.digest;
  else if (image.tag) entry.newTag = image.tag;
  let images = doc.get('images');
  if (!isSeq(images)) {
    images = new YAMLSeq();
    doc.set('images', images);
  }
  const seq = images as YAMLSeq;
  const index = seq.items.findIndex((item) => isMap(item) && item.get('name') === image.name);
  const node = doc.createNode(entry);
  if (index >= 0) seq.items[index] = node;
  else seq.items.push(node);

  const generators = doc.get('configMapGenerator');
  if (isSeq(generators)) {
    const own = generators.items.find(
      (item) => isMap(item) && item.get('name') === environmentConfigMapName(input.component),
    );
    if (isMap(own)) own.set('literals', doc.createNode(input.env.map((e) => `${e.name}=${e.value}`)));
  }
  return doc.toString();
}

/** The commit message: the Snapshot, the Environment and the PromotionRun, then each component's image. */
export function commitMessage(input: {
  snapshot: string;
  environment: string;
  application: string;
  promotionRun?: string;
  binding: string;
  images: readonly { component: string; image: string }[];
}): string {
  const by = input.promotionRun
    ? `PromotionRun ${input.promotionRun}`
    : `SnapshotEnvironmentBinding ${input.binding} (no PromotionRun)`;
  return [
    `Promote Snapshot ${input.snapshot} to Environment ${input.environment}`,
    '',
    `Application: ${input.application}`,
    `Snapshot: ${input.snapshot}`,
    `Environment: ${input.environment}`,
    `By: ${by}`,
    '',
    ...input.images.map((i) => `${i.component}: ${i.image}`),
    '',
  ].join('\n');
}
