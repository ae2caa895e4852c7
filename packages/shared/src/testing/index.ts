/**
 * `@gitops/shared/testing`: test support every package can import (shared is at the bottom of the
 * workspace's dependency graph, so no package's tests create a dependency cycle by importing it). Not
 * part of the production exports of `@gitops/shared`.
 */
export { type ApiServerDouble, startApiServerDouble } from './api-server-double.ts';
export { type ListedEvent, listEvents } from './events.ts';
export { eventually } from './eventually.ts';
export { type HandInformer, handInformer, recordingController } from './hand-informer.ts';
export { type KubeRequestRecorder, type RecordedKubeRequest, recordKubeRequests } from './kube-requests.ts';
export { randomSuffix } from './random-suffix.ts';
export { useFixture } from './use-fixture.ts';
export { useNamespace } from './use-namespace.ts';
