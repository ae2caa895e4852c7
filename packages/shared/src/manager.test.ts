import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { ErrorCode, TerminalError } from './errors.ts';
import { createSilentLogger } from './logger.ts';
import { createManager, type StartStep } from './manager.ts';
import { recordingFeature, recordingInformer } from './testing/recording.ts';

const logger = createSilentLogger();

function step(what: string, journal: string[], run: () => Promise<void> = async () => undefined): StartStep {
  return {
    what,
    run: async () => {
      journal.push(`step ${what}`);
      await run();
    },
  };
}

describe('createManager', () => {
  it('runs the steps, builds the features after them, then informers, open, sync, beforeStart, start; close stops in reverse and releases last', async () => {
    const journal: string[] = [];
    const manager = createManager({
      name: 'test',
      logger,
      steps: [step('migrate', journal), step('register', journal)],
      features: () => {
        journal.push('build');
        return [
          recordingFeature('a', [recordingInformer('x', journal)], journal, { beforeStart: true }),
          recordingFeature('listen', [], journal, { open: true }),
        ];
      },
      release: async () => void journal.push('release'),
    });
    assert.equal(manager.ready(), false);
    await manager.start();
    assert.equal(manager.ready(), true);
    await manager.close();
    assert.equal(manager.ready(), false);
    assert.equal(manager.closed.aborted, true);
    assert.deepEqual(journal, [
      'step migrate',
      'step register',
      'build',
      'start x',
      'open listen',
      'beforeStart a',
      'start a',
      'start listen',
      'stop listen',
      'stop a',
      'stop x',
      'release',
    ]);
    await assert.rejects(manager.start(), /can be started once/);
  });

  it('retries a step that fails for a reason that may pass, and gives up at once on a TerminalError or a permanent error', async () => {
    const journal: string[] = [];
    let failures = 1;
    const flaky = createManager({
      name: 'flaky',
      logger,
      steps: [
        step('connect', journal, async () => {
          if (failures-- > 0) throw new Error('ECONNREFUSED');
        }),
      ],
      features: [],
    });
    await flaky.start();
    assert.deepEqual(journal, ['step connect', 'step connect']);
    assert.equal(flaky.ready(), true);
    await flaky.close();

    const terminal = createManager({
      name: 'terminal',
      logger,
      steps: [
        step('namespace', journal, async () => {
          throw new TerminalError(ErrorCode.configInvalid, 'the namespace does not exist');
        }),
      ],
      features: [],
    });
    await assert.rejects(terminal.start(), /the namespace does not exist/);
    const permanent = createManager({
      name: 'permanent',
      logger,
      isPermanent: (err) => err instanceof RangeError,
      steps: [
        step('migrate', journal, async () => {
          throw new RangeError('migration 0042 failed');
        }),
      ],
      features: [],
    });
    await assert.rejects(permanent.start(), /migration 0042 failed/);
    assert.deepEqual(journal.slice(2), ['step namespace', 'step migrate']);
  });

  it('a close during a step ends start() with an error, builds no feature and still releases', async () => {
    const journal: string[] = [];
    const { promise: inStep, resolve: entered } = Promise.withResolvers<void>();
    const manager = createManager({
      name: 'agent',
      logger,
      steps: [
        {
          what: 'lock',
          retry: false,
          run: (signal) =>
            new Promise<void>((_, reject) => {
              entered();
              signal.addEventListener('abort', () => reject(new Error('aborted')));
            }),
        },
      ],
      features: () => {
        journal.push('build');
        return [];
      },
      release: async () => void journal.push('release'),
    });
    const starting = manager.start();
    await inStep;
    await manager.close();
    await assert.rejects(starting, /aborted/);
    assert.deepEqual(journal, ['release']);
    assert.equal(manager.ready(), false);
  });

  it('a close while the caches fill ends start() as closed during start, with the opened feature stopped', async () => {
    const journal: string[] = [];
    const { promise: opened, resolve: closeNow } = Promise.withResolvers<void>();
    const never = recordingInformer('x', journal);
    never.waitForSync = (signal) =>
      new Promise((resolve) => signal?.addEventListener('abort', () => resolve(false)));
    const manager = createManager({
      name: 'backend',
      logger,
      features: [
        recordingFeature('a', [never], journal),
        { ...recordingFeature('listen', [], journal), open: async () => closeNow() },
      ],
    });
    const starting = manager.start();
    await opened;
    await manager.close();
    await assert.rejects(starting, /the backend was closed during start/);
    assert.deepEqual(journal, ['start x', 'stop listen', 'stop x']);
  });
});
