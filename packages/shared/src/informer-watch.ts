/**
 * An informer's side of the API server's answers: the paginated list, the watch answer's lines, and what
 * one watch event does to the store (informer-store.ts). The list+watch loop that uses them is informer.ts.
 */
import { ErrorCode, KubeApiError, RetryableError } from './errors.ts';
import type { InformerStore } from './informer-store.ts';
import { type KubeObject, objectKey } from './kube.ts';
import { HttpMethod, type KubeConfig, kubeRequest } from './kube-client.ts';

export interface WatchEvent {
  type?: unknown;
  object?: unknown;
}

export type WatchOutcome =
  | { kind: 'closed' }
  | { kind: 'gone' }
  | { kind: 'relist' }
  | { kind: 'silent' }
  | { kind: 'stopped' }
  | { kind: 'error'; err: unknown; delivered: boolean };

function resourceVersionOf(object: unknown): string | undefined {
  const metadata =
    typeof object === 'object' && object !== null ? (object as { metadata?: unknown }).metadata : undefined;
  const rv =
    typeof metadata === 'object' && metadata !== null
      ? (metadata as { resourceVersion?: unknown }).resourceVersion
      : undefined;
  return typeof rv === 'string' && rv !== '' ? rv : undefined;
}

/**
 * Every object of a paginated list (`limit` `pageSize`, following `continue`) and the list's resourceVersion.
 * @throws RetryableError when an answer is not a list; KubeApiError as kubeRequest.
 */
export async function listAll(
  kc: KubeConfig,
  path: string,
  options: { labelSelector?: string; fieldSelector?: string; pageSize: number; signal: AbortSignal },
): Promise<{ items: unknown[]; resourceVersion: string }> {
  const items: unknown[] = [];
  let continueToken: string | undefined;
  let resourceVersion = '';
  do {
    const page = await kubeRequest(kc, {
      method: HttpMethod.GET,
      path,
      query: {
        labelSelector: options.labelSelector,
        fieldSelector: options.fieldSelector,
        limit: options.pageSize,
        continue: continueToken,
      },
      signal: options.signal,
    });
    const list = page as { items?: unknown; metadata?: { resourceVersion?: unknown; continue?: unknown } };
    if (!Array.isArray(list.items)) {
      throw new RetryableError(ErrorCode.kubeRequestFailed, `GET ${path}: the answer is not a list`);
    }
    items.push(...list.items);
    continueToken =
      typeof list.metadata?.continue === 'string' && list.metadata.continue
        ? list.metadata.continue
        : undefined;
    if (typeof list.metadata?.resourceVersion === 'string') resourceVersion = list.metadata.resourceVersion;
  } while (continueToken);
  return { items, resourceVersion };
}

/**
 * The lines of a watch answer (one JSON event per line). Lines are cut from the Buffers and decoded whole, so
 * a character split between two chunks stays intact.
 */
export async function* linesOf(stream: AsyncIterable<Buffer>): AsyncGenerator<string> {
  let pending: Buffer[] = [];
  for await (const chunk of stream) {
    let start = 0;
    for (let newline = chunk.indexOf(10); newline >= 0; newline = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, newline);
      const line = pending.length > 0 ? Buffer.concat([...pending, piece]) : piece;
      pending = [];
      start = newline + 1;
      yield line.toString('utf8');
    }
    if (start < chunk.length) pending.push(chunk.subarray(start));
  }
}

/**
 * One watch event into the store: the resourceVersion it moves the watch to, and an outcome when the watch
 * must end (410 Gone: relist; an ERROR event: restart with backoff).
 */
export function applyWatchEvent<T extends KubeObject>(
  event: WatchEvent,
  store: InformerStore<T>,
  prepare: (raw: unknown) => T | undefined,
  path: string,
): { resourceVersion?: string; outcome?: WatchOutcome } {
  const { type } = event;
  if (type === 'ERROR') {
    const status = (event.object ?? {}) as { code?: unknown; message?: unknown; reason?: unknown };
    if (status.code === 410) return { outcome: { kind: 'gone' } };
    return {
      outcome: {
        kind: 'error',
        delivered: true,
        err: new KubeApiError({
          statusCode: typeof status.code === 'number' ? status.code : 0,
          reason: typeof status.reason === 'string' ? status.reason : undefined,
          method: 'GET',
          path,
          message: `watch ${path}: ${String(status.message ?? 'error event')}`,
        }),
      },
    };
  }
  // Bookmarks carry only metadata.resourceVersion (no name), so read it without isKubeObject.
  const resourceVersion = resourceVersionOf(event.object);
  if (type === 'BOOKMARK') return { resourceVersion };
  if (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED') return {};
  const object = prepare(event.object);
  if (!object) return { resourceVersion };
  if (type === 'DELETED') {
    store.remove(object);
    return { resourceVersion };
  }
  // Same object version delivered twice (e.g. replayed after a reconnect): nothing changed.
  const old = store.cached(objectKey(object));
  if (
    old?.metadata.resourceVersion === undefined ||
    old.metadata.resourceVersion !== object.metadata.resourceVersion
  )
    store.put(object);
  return { resourceVersion };
}
