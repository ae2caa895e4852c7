/** The CRDs a local control plane installs: which documents, and how they are applied. */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { argoCdCrdFiles } from './binaries.ts';
import { type KubeEndpoint, kubeRequest } from './kube-request.ts';
import { repoRoot } from './paths.ts';
import { waitFor } from './process.ts';

/**
 * Reads every CRD document from our packages/api/crds (the managed-gitops kinds), the App Studio kinds in
 * crds/appstudio and, as a cluster without the App Studio application service needs them, Application and
 * Component from crds/appstudio-dependencies and SpaceRequest from crds/devsandbox-dependencies; the RHOAS operator's packages/api/crds/rhoas (a separate set);
 * and Argo CD's Application/AppProject CRDs.
 */
export async function crdDocuments(): Promise<Record<string, unknown>[]> {
  const files: string[] = [];
  for (const ours of [
    join(repoRoot, 'packages', 'api', 'crds'),
    join(repoRoot, 'packages', 'api', 'crds', 'appstudio'),
    join(repoRoot, 'packages', 'api', 'crds', 'appstudio-dependencies'),
    join(repoRoot, 'packages', 'api', 'crds', 'devsandbox-dependencies'),
    join(repoRoot, 'packages', 'api', 'crds', 'rhoas'),
  ]) {
    files.push(
      ...(await readdir(ours).catch(() => [] as string[]))
        .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
        .sort()
        .map((f) => join(ours, f)),
    );
  }
  files.push(...(await argoCdCrdFiles()));
  const docs: Record<string, unknown>[] = [];
  for (const file of files) {
    for (const doc of parseAllDocuments(await readFile(file, 'utf8'))) {
      const value = doc.toJS() as Record<string, unknown> | null;
      if (value && value.kind === 'CustomResourceDefinition') docs.push(value);
    }
  }
  return docs;
}

/** Server-side applies CRDs (Argo CD's Application CRD is ~400 KB: never client-side apply) and waits for Established. */
export async function installCrds(endpoint: KubeEndpoint, crds: Record<string, unknown>[]): Promise<void> {
  for (const crd of crds) {
    const name = (crd.metadata as { name: string }).name;
    const res = await kubeRequest(
      endpoint,
      'PATCH',
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}?fieldManager=gitops-local-env&force=true`,
      crd,
      'application/apply-patch+yaml',
    );
    if (res.status >= 300)
      throw new Error(`applying CRD ${name} failed (${res.status}): ${JSON.stringify(res.body)}`);
  }
  for (const crd of crds) {
    const name = (crd.metadata as { name: string }).name;
    await waitFor(`CRD ${name} Established`, async () => {
      const res = await kubeRequest(
        endpoint,
        'GET',
        `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`,
      );
      const conditions = (res.body as { status?: { conditions?: { type: string; status: string }[] } }).status
        ?.conditions;
      return conditions?.some((c) => c.type === 'Established' && c.status === 'True') ?? false;
    });
  }
}
