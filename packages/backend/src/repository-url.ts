/** Repository URLs as the backend compares them (repository credentials, the refresh of applications). */

/**
 * The AppProject's rule (cluster-agent app-project.render.ts `normaliseRepoUrl`): trimmed, lower-case,
 * without trailing `/` or `.git`, so the stored URL and the AppProject's sourceRepos agree.
 */
export function normalizeRepositoryUrl(url: string): string {
  let normalised = url.trim().toLowerCase();
  while (normalised.endsWith('/')) normalised = normalised.slice(0, -1);
  if (normalised.endsWith('.git')) normalised = normalised.slice(0, -4);
  while (normalised.endsWith('/')) normalised = normalised.slice(0, -1);
  return normalised;
}
