import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

/** Absolute path of `packages/api/crds`, the CRD YAML that is the source of truth of the API. */
export const crdDirectory: string = fileURLToPath(new URL('../crds', import.meta.url));

/** The App Studio environment kinds (appstudio.redhat.com): `packages/api/crds/appstudio`. */
export const appStudioCrdDirectory: string = join(crdDirectory, 'appstudio');

/**
 * Application and Component (appstudio.redhat.com, owned by another App Studio service), for clusters
 * that lack them: `packages/api/crds/appstudio-dependencies` (kustomize component
 * manifests/components/appstudio-dependencies).
 */
export const appStudioDependencyCrdDirectory: string = join(crdDirectory, 'appstudio-dependencies');

/** The parts of a CustomResourceDefinition manifest that code in this workspace reads. */
export interface CustomResourceDefinitionManifest {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string; [key: string]: unknown };
  spec: {
    group: string;
    names: { kind: string; listKind: string; plural: string; singular: string; shortNames?: string[] };
    scope: 'Namespaced' | 'Cluster';
    versions: {
      name: string;
      served: boolean;
      storage: boolean;
      schema: { openAPIV3Schema: Record<string, unknown> };
      subresources?: { status?: Record<string, never> };
      additionalPrinterColumns?: { name: string; type: string; jsonPath: string; priority?: number }[];
    }[];
    [key: string]: unknown;
  };
}

/**
 * Reads and parses every CRD in `directory` (default {@link crdDirectory}, the managed-gitops kinds; its
 * subfolders are not read): files in name order, every YAML document that is a CustomResourceDefinition.
 * Throws on YAML syntax errors, so a broken file never installs half the API.
 */
export async function loadCrds(
  directory: string = crdDirectory,
): Promise<CustomResourceDefinitionManifest[]> {
  const files = (await readdir(directory)).filter((f) => f.endsWith('.yaml')).sort();
  const crds: CustomResourceDefinitionManifest[] = [];
  for (const file of files) {
    for (const doc of parseAllDocuments(await readFile(join(directory, file), 'utf8'))) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
      const value: unknown = doc.toJS();
      if (isCrd(value)) crds.push(value);
    }
  }
  return crds;
}

function isCrd(value: unknown): value is CustomResourceDefinitionManifest {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { kind?: unknown }).kind === 'CustomResourceDefinition'
  );
}
