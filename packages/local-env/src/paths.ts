import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Root of the repository (this file lives in packages/local-env/src). */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** Cache for one-time builds (control plane, Argo CD); outside the work tree so clones share it. */
export function cacheDir(): string {
  return process.env.GITOPS_CACHE_DIR ?? join(homedir(), '.cache', 'gitops-service');
}
