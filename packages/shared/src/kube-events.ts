/**
 * Kubernetes Events: a recorder that writes core/v1 Events of our objects, a repeated one counted on the
 * existing Event instead of added.
 */
import { hostname } from 'node:os';
import { HttpMethod, PatchStrategy } from '@kubernetes/client-node';
import { isNotFound } from './errors.ts';
import { type KubeObject, objectKey } from './kube.ts';
import { type KubeConfig, kubeRequest } from './kube-client.ts';
import type { Logger } from './logger.ts';

export type EventType = 'Normal' | 'Warning';

export interface EventRecorder {
  /**
   * Records an Event on `involved` (best effort: failures are logged, never thrown). The same
   * event repeated bumps `count` and `lastTimestamp` of the existing Event instead of adding one.
   */
  event(involved: KubeObject, type: EventType, reason: string, message: string): Promise<void>;
}

export interface EventRecorderOptions {
  /** `source.component` / `reportingComponent`, e.g. `gitops-backend`. */
  component: string;
  /** Default: the host name (the pod name in a cluster). */
  instance?: string;
  logger?: Logger;
  /** Remembered events for de-duplication (least recently used are forgotten). Default 4096. */
  cacheSize?: number;
  /** Wall clock for timestamps; tests may pin it. */
  now?: () => Date;
}

/** client-go caps messages at 1 KiB for events.k8s.io; we do the same for core/v1. */
const maxEventMessageLength = 1024;

/** Creates an Events recorder that writes core/v1 Events. */
export function createEventRecorder(kc: KubeConfig, options: EventRecorderOptions): EventRecorder {
  const instance = options.instance ?? hostname();
  const cacheSize = options.cacheSize ?? 4096;
  const now = options.now ?? (() => new Date());
  const recent = new Map<string, { namespace: string; name: string; count: number }>();
  const inFlight = new Map<string, Promise<void>>();

  const timestamp = () =>
    now()
      .toISOString()
      .replace(/\.\d{3}Z$/, 'Z');

  async function write(involved: KubeObject, type: EventType, reason: string, message: string, key: string) {
    const namespace = involved.metadata.namespace ?? 'default';
    const previous = recent.get(key);
    if (previous) {
      recent.delete(key);
      try {
        await kubeRequest(kc, {
          method: HttpMethod.PATCH,
          path: `/api/v1/namespaces/${encodeURIComponent(previous.namespace)}/events/${encodeURIComponent(previous.name)}`,
          body: { count: previous.count + 1, lastTimestamp: timestamp() },
          contentType: PatchStrategy.MergePatch,
        });
        recent.set(key, { ...previous, count: previous.count + 1 });
        return;
      } catch (err) {
        if (!isNotFound(err)) throw err;
        // The Event expired (the API server keeps them 1 h by default): create a new one.
      }
    }
    const suffix = (
      BigInt(now().getTime()) * 1_000_000n +
      BigInt(Math.floor(Math.random() * 1_000_000))
    ).toString(16);
    const name = `${involved.metadata.name.slice(0, 253 - suffix.length - 1)}.${suffix}`;
    const time = timestamp();
    await kubeRequest(kc, {
      method: HttpMethod.POST,
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`,
      body: {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name, namespace },
        involvedObject: {
          apiVersion: involved.apiVersion,
          kind: involved.kind,
          name: involved.metadata.name,
          namespace: involved.metadata.namespace,
          uid: involved.metadata.uid,
          resourceVersion: involved.metadata.resourceVersion,
        },
        type,
        reason,
        message,
        count: 1,
        firstTimestamp: time,
        lastTimestamp: time,
        source: { component: options.component, host: instance },
        reportingComponent: options.component,
        reportingInstance: instance,
      },
    });
    recent.set(key, { namespace, name, count: 1 });
    while (recent.size > cacheSize) {
      const oldest = recent.keys().next().value;
      if (oldest === undefined) break;
      recent.delete(oldest);
    }
  }

  return {
    async event(involved, type, reason, rawMessage) {
      const message =
        rawMessage.length > maxEventMessageLength
          ? `${rawMessage.slice(0, maxEventMessageLength - 3)}...`
          : rawMessage;
      const identity = involved.metadata.uid ?? `${involved.kind}/${objectKey(involved)}`;
      const key = JSON.stringify([identity, type, reason, message]);
      // Serialise writes of one event so concurrent repeats bump the count instead of racing to create.
      const previous = inFlight.get(key) ?? Promise.resolve();
      const current = previous
        .then(() => write(involved, type, reason, message, key))
        .catch((err: unknown) => {
          options.logger?.warn({ err, reason, involved: objectKey(involved) }, 'could not record event');
        });
      inFlight.set(key, current);
      await current;
      if (inFlight.get(key) === current) inFlight.delete(key);
    },
  };
}
