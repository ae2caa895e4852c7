/**
 * A repository URL as Argo CD compares them (util/git NormalizeGitURL): trimmed, lower case, without trailing
 * slashes and without a trailing `.git`. One rule for both processes: the backend stores it
 * (`normalized_repository_url`), the agent puts it in the AppProject's sourceRepos, and the two must agree.
 */
export function normalizeRepositoryUrl(url: string): string {
  let normalised = url.trim().toLowerCase();
  while (normalised.endsWith('/')) normalised = normalised.slice(0, -1);
  if (normalised.endsWith('.git')) normalised = normalised.slice(0, -4);
  while (normalised.endsWith('/')) normalised = normalised.slice(0, -1);
  return normalised;
}
