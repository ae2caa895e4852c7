import type { Feature } from '../feature.ts';
import type { Informer } from '../informer.ts';
import type { KubeObject } from '../kube.ts';

/**
 * An informer that only writes what is done to it into `journal` (`start x`, `stop x`): for tests of what
 * starts, awaits and stops informers (the feature set, the manager). `synced: false` never syncs.
 */
export function recordingInformer(name: string, journal: string[], synced = true): Informer<KubeObject> {
  return {
    start: () => journal.push(`start ${name}`),
    stop: async () => {
      journal.push(`stop ${name}`);
    },
    hasSynced: () => synced,
    waitForSync: async () => synced,
    list: () => [],
    get: () => undefined,
    addIndexers: () => undefined,
    byIndex: () => [],
    onAdd: () => () => undefined,
    onUpdate: () => () => undefined,
    onDelete: () => () => undefined,
    lastResourceVersion: () => '',
  };
}

/**
 * A feature that writes what is done to it into `journal` (`start a`, `open a`, ...). `hooks` adds an `open`
 * or a `beforeStart` that is journalled too.
 */
export function recordingFeature(
  name: string,
  informers: Informer<KubeObject>[],
  journal: string[],
  hooks: { open?: boolean; beforeStart?: boolean } = {},
): Feature {
  return {
    name,
    informers,
    ...(hooks.open ? { open: async () => void journal.push(`open ${name}`) } : {}),
    ...(hooks.beforeStart ? { beforeStart: async () => void journal.push(`beforeStart ${name}`) } : {}),
    start: () => journal.push(`start ${name}`),
    resync: () => journal.push(`resync ${name}`),
    stop: async () => {
      journal.push(`stop ${name}`);
    },
  };
}
