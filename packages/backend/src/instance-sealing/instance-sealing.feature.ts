/**
 * Credentials sealed for the engine instance that uses them (docs/threat-model.md, migration 0013): the backend
 * holds the only key that opens the stored credentials, and seals for each instance, with the instance's
 * published public key, what that instance's agents may read. The stores seal in the transaction that writes a
 * credential or moves a tenant (sealCredentialsForInstances); this feature is what makes it level-based: a notification (`gitops_instance_sealing`:
 * a tenant placed or moved, a release done, a credential written by any path, a key published) seals the scope
 * it names within moments, and a periodic pass over everything repairs whatever was missed.
 */
import { type SealingScope, sealCredentialsForInstances } from '@gitops/db';
import { type Periodic, runPeriodically } from '@gitops/shared';
import type { BackendContext, BackendFeature } from '../backend-feature.ts';

/** Notifications arriving within this window are sealed for in one pass. */
const BATCH_WINDOW_MS = 20;

/** The scope of a `gitops_instance_sealing` payload (`tenant:<id>` or `instance:<id>`), or undefined. */
export function scopeOfNotification(payload: string): { tenant?: string; instance?: string } | undefined {
  const match = /^(tenant|instance):([0-9a-f-]{36})$/.exec(payload);
  if (!match) return undefined;
  return match[1] === 'tenant' ? { tenant: match[2] } : { instance: match[2] };
}

export function createInstanceSealingFeature(ctx: BackendContext): BackendFeature {
  const { db, sealer, logger } = ctx;
  const log = logger.child({ component: 'instance-sealing' });
  const tenants = new Set<string>();
  const instances = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let periodic: Periodic | undefined;
  /** Instances already reported as waiting for a key (said once, again when it changes). */
  let reportedWaiting = '';

  async function seal(scope: SealingScope): Promise<void> {
    const result = await sealCredentialsForInstances(db, sealer, scope);
    if (result.sealed > 0 || result.removed > 0)
      log.info({ sealed: result.sealed, removed: result.removed }, 'credentials sealed for engine instances');
    if (result.unreadable > 0)
      log.warn(
        { values: result.unreadable },
        'stored credentials this backend cannot open (GITOPS_ENCRYPTION_KEYS?)',
      );
    const waiting = result.waitingForKey.sort().join(',');
    if (scope === 'all' && waiting !== reportedWaiting) {
      reportedWaiting = waiting;
      if (waiting !== '')
        log.warn(
          { engineInstanceIds: result.waitingForKey },
          'engine instances whose agent has published no key yet: their credentials are sealed once it starts',
        );
    }
  }

  function flush(): void {
    timer = undefined;
    const scope = { clusterUserIds: [...tenants], engineInstanceIds: [...instances] };
    tenants.clear();
    instances.clear();
    running = running
      .then(() => seal(scope))
      .catch((err: unknown) => {
        log.warn({ err }, 'sealing credentials for engine instances failed; the periodic pass retries');
      });
  }

  return {
    name: 'instance-sealing',
    informers: [],
    notifications: {
      instanceSealing(payload) {
        const scope = scopeOfNotification(payload);
        if (scope?.tenant) tenants.add(scope.tenant);
        if (scope?.instance) instances.add(scope.instance);
        if (scope && !timer) timer = setTimeout(flush, BATCH_WINDOW_MS);
      },
    },
    resync() {
      running = running
        .then(() => seal('all'))
        .catch((err: unknown) => log.warn({ err }, 'sealing pass failed'));
    },
    start() {
      periodic = runPeriodically('instance sealing', ctx.config.resyncIntervalMs, () => seal('all'), {
        logger: log,
        jitter: 0.25,
        runAtStart: true,
      });
    },
    async stop() {
      if (timer) clearTimeout(timer);
      await periodic?.stop();
      await running;
    },
  };
}
