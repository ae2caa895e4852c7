/**
 * One descriptor per kind: everything a controller needs to address objects of the kind (group, version,
 * kind, plural, scope), written once. Informers take `resource`, references and Events take the
 * `apiVersion`/`kind`; nothing re-derives them from strings elsewhere.
 */
export interface KindDescriptor<K extends string = string> {
  readonly group: string;
  readonly version: string;
  /** `<group>/<version>` (or `<version>` for the core group). */
  readonly apiVersion: string;
  readonly kind: K;
  /** The resource name in API paths. */
  readonly plural: string;
  readonly namespaced: boolean;
  /** What an informer or a collection path needs. */
  readonly resource: { readonly apiVersion: string; readonly plural: string };
}

/** Describes a kind; `apiVersion` and `resource` follow from the other fields. */
export function describeKind<K extends string>(fields: {
  group: string;
  version: string;
  kind: K;
  plural: string;
  namespaced?: boolean;
}): KindDescriptor<K> {
  const apiVersion = fields.group === '' ? fields.version : `${fields.group}/${fields.version}`;
  return {
    group: fields.group,
    version: fields.version,
    apiVersion,
    kind: fields.kind,
    plural: fields.plural,
    namespaced: fields.namespaced ?? true,
    resource: { apiVersion, plural: fields.plural },
  };
}

/**
 * The controller ownerReference that makes `owner`, an object of `kind`, own a dependent (the garbage
 * collector deletes the dependent with it). `blockOwnerDeletion`: whether a foreground deletion of the owner
 * waits for the dependent.
 */
export function controllerReference(
  kind: { apiVersion: string; kind: string },
  owner: { metadata: { name: string; uid?: string } },
  options: { blockOwnerDeletion: boolean },
) {
  return {
    apiVersion: kind.apiVersion,
    kind: kind.kind,
    name: owner.metadata.name,
    uid: owner.metadata.uid,
    controller: true,
    blockOwnerDeletion: options.blockOwnerDeletion,
  };
}
