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
