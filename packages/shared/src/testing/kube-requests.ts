/**
 * The requests the processes of this test send to the API server, as they go out (tests only):
 * `recordKubeRequests` subscribes to undici's `undici:request:create` diagnostics channel, which every request of
 * our Kubernetes client (kube-client.ts, undici underneath) publishes, and keeps each one's method and path.
 * Nothing is changed or answered in their place: the requests reach the real API server as before. For the costs
 * that do not vary with load (requests per change), as `recordStatements` (`@gitops/db/testing`) for statements.
 */
import diagnosticsChannel from 'node:diagnostics_channel';

export interface RecordedKubeRequest {
  method: string;
  /** The path with its query, as sent. */
  path: string;
}

export interface KubeRequestRecorder {
  readonly requests: readonly RecordedKubeRequest[];
  stop(): void;
}

const CHANNEL = 'undici:request:create';

export function recordKubeRequests(): KubeRequestRecorder {
  const requests: RecordedKubeRequest[] = [];
  const onRequest = (message: unknown) => {
    const request = (message as { request?: { method?: unknown; path?: unknown } }).request;
    if (typeof request?.method === 'string' && typeof request.path === 'string')
      requests.push({ method: request.method, path: request.path });
  };
  diagnosticsChannel.subscribe(CHANNEL, onRequest);
  return { requests, stop: () => diagnosticsChannel.unsubscribe(CHANNEL, onRequest) };
}
