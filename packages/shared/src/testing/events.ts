import { HttpMethod, type KubeConfig, kubeRequest } from '../kube-client.ts';

/** A core/v1 Event, the fields the tests read typed. */
export interface ListedEvent {
  type: string;
  reason: string;
  message: string;
  involvedObject: { name: string; uid?: string };
  [field: string]: unknown;
}

/**
 * The Events of `namespace` about the object `involved` (by uid or by name: the API server's field
 * selector), or all of the namespace's.
 */
export async function listEvents(
  kc: KubeConfig,
  namespace: string,
  involved?: { uid: string } | { name: string },
): Promise<ListedEvent[]> {
  const fieldSelector =
    involved === undefined
      ? undefined
      : 'uid' in involved
        ? `involvedObject.uid=${involved.uid}`
        : `involvedObject.name=${involved.name}`;
  const list = (await kubeRequest(kc, {
    method: HttpMethod.GET,
    path: `/api/v1/namespaces/${namespace}/events`,
    query: { fieldSelector },
  })) as { items: ListedEvent[] };
  return list.items;
}
