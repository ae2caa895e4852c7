/**
 * The render's steps inside a clone of the GitOps repository (the rest: render.reconciler.ts):
 * `renderAndPush` (checkout, overlays, commit, push; rebased by rendering again) and `followLaterCommits`
 * (an unchanged render whose branch moved on).
 */
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { AppStudioKinds } from '@gitops/api';
import { isConflict, type Logger } from '@gitops/shared';
import type { BindingCr, Json } from '../objects.ts';
import { writeChangedStatus } from '../writes.ts';
import { checkout, type GitCredentials, GitError } from './git.ts';
import { credentialsFor } from './render.credentials.ts';
import type { EnvVar, Image, RenderSteps } from './render.reconciler.ts';
import { RenderProblem } from './render.status.ts';
import { basePath, type GitOpsRepository, overlayPath, renderOverlay } from './render.ts';

/** Pushes tried when someone else pushed first (fetch, render and commit again each time). */
const PUSH_ATTEMPTS = 5;

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Step 3: renders, commits and pushes; returns the commit the branch is at with the render in it. */
export async function renderAndPush(
  deps: Pick<RenderSteps, 'gitOptions'>,
  input: {
    binding: BindingCr;
    repo: GitOpsRepository;
    credentials: GitCredentials;
    images: Image[];
    env: EnvVar[];
    message: string;
    logger: Logger;
  },
): Promise<{ commit: string; pushed: boolean }> {
  const { environment } = input.binding.spec;
  for (let attempt = 1; ; attempt++) {
    const tree = await checkout(input.repo.url, input.repo.branch, input.credentials, deps.gitOptions);
    try {
      for (const { component, image } of input.images) {
        if (!(await exists(join(tree.dir, basePath(input.repo, component)))))
          throw new RenderProblem(
            `the GitOps repository has no ${basePath(input.repo, component)} for component ${component} (branch ${input.repo.branch})`,
          );
        const file = join(tree.dir, overlayPath(input.repo, component, environment), 'kustomization.yaml');
        const before = await readFile(file, 'utf8').catch(() => undefined);
        const after = renderOverlay(before, { component, image, env: input.env });
        if (after !== before) {
          await mkdir(dirname(file), { recursive: true });
          await writeFile(file, after);
        }
      }
      const commit = await tree.commitAll(input.message);
      if (!commit) return { commit: await tree.head(), pushed: false };
      try {
        await tree.push();
        return { commit, pushed: true };
      } catch (err) {
        if (!(err instanceof GitError) || err.failure !== 'conflict' || attempt >= PUSH_ATTEMPTS) throw err;
        input.logger.info({ attempt }, 'the branch moved while rendering; fetching and rendering again');
        await new Promise((resolve) => setTimeout(resolve, 100 + Math.random() * 400 * attempt));
      }
    } finally {
      await tree.dispose();
    }
  }
}

/**
 * Argo CD syncs a branch's head: when someone commits to the branch after our render (another
 * environment's promotion, another application), the deployment reports that later commit and would never
 * match our `commitID`. When the later commit has the render in its history and the component's base and
 * this environment's overlay are the same there, what is deployed is what we rendered: the component's
 * `commitID` follows it (so a PromotionRun waiting for "Synced and Healthy at that commit" completes).
 */
export async function followLaterCommits(
  deps: Pick<RenderSteps, 'kc' | 'gitOptions'>,
  binding: BindingCr,
  repo: GitOpsRepository,
  logger: Logger,
): Promise<void> {
  const { environment } = binding.spec;
  const deployed = new Map(
    (binding.status?.gitopsDeployments ?? []).map((d) => [d.componentName, d.commitID ?? '']),
  );
  const components = binding.status?.components ?? [];
  const drifted = components.filter((c) => {
    const revision = deployed.get(c.name) ?? '';
    return revision !== '' && revision !== c.gitopsRepository.commitID;
  });
  if (drifted.length === 0) return;
  let tree: Awaited<ReturnType<typeof checkout>> | undefined;
  try {
    const credentials = await credentialsFor(deps.kc, binding.metadata.namespace ?? '', repo.url);
    tree = await checkout(repo.url, repo.branch, credentials, deps.gitOptions);
    let changed = false;
    const next: Json[] = [];
    for (const c of components) {
      const ours = c.gitopsRepository.commitID;
      const theirs = deployed.get(c.name) ?? '';
      let same = false;
      if (theirs !== '' && theirs !== ours && (await tree.isAncestor(ours, theirs))) {
        same = true;
        for (const path of [basePath(repo, c.name), overlayPath(repo, c.name, environment)])
          if ((await tree.objectAt(ours, path)) !== (await tree.objectAt(theirs, path))) same = false;
      }
      next.push(same ? { ...c, gitopsRepository: { ...c.gitopsRepository, commitID: theirs } } : c);
      changed ||= same;
    }
    if (changed) {
      logger.info('the branch moved on without changing the render; following the deployed commit');
      await writeChangedStatus(deps.kc, AppStudioKinds.SnapshotEnvironmentBinding, binding, {
        components: next,
      });
    }
  } catch (err) {
    // Only a convenience for the PromotionRun: the next status change or resync looks again.
    if (err instanceof GitError || err instanceof RenderProblem || isConflict(err)) {
      logger.debug({ err }, 'could not compare the deployed commit with the render');
      return;
    }
    throw err;
  } finally {
    await tree?.dispose();
  }
}
