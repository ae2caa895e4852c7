/**
 * The engine instance's own key pair (docs/threat-model.md, migration 0013). The private key never leaves this
 * cluster: it lives in the Secret `gitops-service-instance-key` of the Argo CD namespace, made by the first agent
 * that starts (a replica that loses the race reads the winner's), and only its public key is published to the
 * database, where the backend seals with it what this instance needs. A rotation asked for by an operator
 * (`kubectl gitops instances rotate-key`) adds a new key and publishes it; the backend re-seals everything with
 * it, and an older private key is dropped from the Secret once no value sealed with it is left. Nothing stops
 * meanwhile: every key still in use stays in the keyring.
 *
 * An agent connected with the backend's database role (the 0.1.0 way) has no instance key: it opens the stored
 * credentials with GITOPS_ENCRYPTION_KEYS as before.
 */
import { MANAGED_BY_LABELS } from '@gitops/api';
import {
  createInstanceKeyring,
  type Db,
  generateInstanceKeyPair,
  getInstanceKeyState,
  type InstanceKeyPair,
  type InstanceKeyring,
  publishInstanceKey,
} from '@gitops/db';
import {
  collectionPath,
  getObject,
  HttpMethod,
  isConflict,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  type Logger,
  type Periodic,
  runPeriodically,
  type StartStep,
  secretRef,
} from '@gitops/shared';
import { FIELD_MANAGER } from './argocd.ts';

export const INSTANCE_KEY_SECRET = 'gitops-service-instance-key';
/** How often the agent looks for a rotation request and for keys no longer in use. */
const KEY_CHECK_INTERVAL_MS = 10_000;

/** What the Secret holds (its `keys` entry, JSON): every private key still needed, and the active one. */
interface StoredKeys {
  active: string;
  keys: { keyId: string; publicKey: string; privateKey: string }[];
}

export function parseStoredKeys(secret: KubeObject | undefined): StoredKeys | undefined {
  const data = (secret as { data?: Record<string, string> } | undefined)?.data?.keys;
  if (typeof data !== 'string') return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(data, 'base64').toString('utf8')) as StoredKeys;
    const valid =
      typeof parsed.active === 'string' &&
      Array.isArray(parsed.keys) &&
      parsed.keys.every(
        (k) =>
          typeof k.keyId === 'string' && typeof k.publicKey === 'string' && typeof k.privateKey === 'string',
      ) &&
      parsed.keys.some((k) => k.keyId === parsed.active);
    return valid ? parsed : undefined;
  } catch {
    return undefined;
  }
}

const stored = (pair: InstanceKeyPair) => ({
  keyId: pair.keyId,
  publicKey: pair.publicKey.toString('base64'),
  privateKey: pair.privateKey.toString('base64'),
});

function secretOf(namespace: string, keys: StoredKeys, resourceVersion?: string) {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: INSTANCE_KEY_SECRET,
      namespace,
      labels: MANAGED_BY_LABELS,
      ...(resourceVersion ? { resourceVersion } : {}),
    },
    type: 'Opaque',
    data: { keys: Buffer.from(JSON.stringify(keys)).toString('base64') },
  };
}

export interface InstanceKeys {
  /** The start step: load (or make) the key and publish it. Skipped for an agent without its own role. */
  readonly step: StartStep;
  /** The private keys in use, or undefined for an agent with the backend's role. */
  keyring(): InstanceKeyring | undefined;
  /** Looks for a rotation request and prunes keys no longer in use, periodically (active replica). */
  start(): void;
  stop(): Promise<void>;
}

export function createInstanceKeys(deps: {
  kc: KubeConfig;
  db: Db;
  namespace: string;
  logger: Logger;
  engineInstanceId: () => string;
  /** False for an agent connected with the backend's role (no instance key then). */
  ownRole: () => boolean;
}): InstanceKeys {
  const { kc, db, namespace } = deps;
  const log = deps.logger.child({ component: 'instance-key' });
  const path = `${collectionPath({ apiVersion: 'v1', plural: 'secrets', namespace })}`;
  let keys: StoredKeys | undefined;
  let keyring: InstanceKeyring | undefined;
  let periodic: Periodic | undefined;

  function use(next: StoredKeys) {
    keys = next;
    keyring = createInstanceKeyring(
      next.keys.map((k) => ({ keyId: k.keyId, privateKey: Buffer.from(k.privateKey, 'base64') })),
    );
  }

  async function read(signal?: AbortSignal) {
    const secret = await getObject(kc, secretRef(namespace, INSTANCE_KEY_SECRET), { signal });
    return { secret, keys: parseStoredKeys(secret) };
  }

  /** The Secret's keys, made when there is none (a replica that loses the race to create it reads the winner's). */
  async function loadOrCreate(signal: AbortSignal): Promise<StoredKeys> {
    const found = await read(signal);
    if (found.keys) return found.keys;
    if (found.secret) {
      throw new Error(
        `Secret ${namespace}/${INSTANCE_KEY_SECRET} holds no valid key; delete it to make a new one`,
      );
    }
    const pair = await generateInstanceKeyPair();
    const created = { active: pair.keyId, keys: [stored(pair)] };
    try {
      await kubeRequest(kc, {
        method: HttpMethod.POST,
        path,
        body: secretOf(namespace, created),
        query: { fieldManager: FIELD_MANAGER },
        signal,
      });
      log.info({ keyId: pair.keyId }, 'engine instance key made');
      return created;
    } catch (err) {
      if (!isConflict(err)) throw err;
      const winner = await read(signal);
      if (!winner.keys) throw err;
      return winner.keys;
    }
  }

  async function publishActive() {
    const active = keys?.keys.find((k) => k.keyId === keys?.active);
    if (!active) return;
    await publishInstanceKey(db, { keyId: active.keyId, publicKey: Buffer.from(active.publicKey, 'base64') });
  }

  /** Writes `next` over the Secret at `resourceVersion` (a conflict: another replica changed it; next look). */
  async function write(next: StoredKeys, resourceVersion: string | undefined, signal: AbortSignal) {
    await kubeRequest(kc, {
      method: HttpMethod.PUT,
      path: `${path}/${INSTANCE_KEY_SECRET}`,
      body: secretOf(namespace, next, resourceVersion),
      query: { fieldManager: FIELD_MANAGER },
      signal,
    });
    use(next);
  }

  async function check(signal: AbortSignal) {
    if (!keys) return;
    const state = await getInstanceKeyState(db, deps.engineInstanceId(), { keysInUse: keys.keys.length > 1 });
    // The usual look: one key, the one sealed with, no rotation asked for. Nothing to do, no API request.
    if (!state.rotationRequested && keys.keys.length === 1 && state.sealingKeyId === keys.active) return;
    const current = await read(signal);
    if (!current.keys) return;
    use(current.keys);
    if (state.rotationRequested) {
      const pair = await generateInstanceKeyPair();
      await write(
        { active: pair.keyId, keys: [...current.keys.keys, stored(pair)] },
        current.secret?.metadata.resourceVersion,
        signal,
      );
      await publishActive();
      log.info({ keyId: pair.keyId }, 'engine instance key rotated: the backend re-seals with the new key');
      return;
    }
    if (state.sealingKeyId !== current.keys.active) await publishActive();
    // Older keys go once nothing sealed with them is left (and the new key is the one sealed with).
    const unused = current.keys.keys.filter(
      (k) => k.keyId !== current.keys?.active && !state.keyIdsInUse.includes(k.keyId),
    );
    if (unused.length > 0 && state.sealingKeyId === current.keys.active) {
      const kept = current.keys.keys.filter((k) => !unused.includes(k));
      await write(
        { active: current.keys.active, keys: kept },
        current.secret?.metadata.resourceVersion,
        signal,
      );
      log.info({ keyIds: unused.map((k) => k.keyId) }, 'engine instance keys no longer in use removed');
    }
  }

  return {
    step: {
      what: "loading the engine instance's key",
      async run(signal) {
        if (!deps.ownRole()) return;
        use(await loadOrCreate(signal));
        await publishActive();
      },
    },
    keyring: () => keyring,
    start() {
      if (!keys) return;
      periodic = runPeriodically('instance key check', KEY_CHECK_INTERVAL_MS, (signal) => check(signal), {
        logger: log,
        jitter: 0.25,
      });
    },
    async stop() {
      await periodic?.stop();
    },
  };
}
