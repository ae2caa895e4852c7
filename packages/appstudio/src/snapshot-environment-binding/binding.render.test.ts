import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'vitest';
import { componentDeploymentConditions, duplicateComponent, gitOpsDeploymentName } from './binding.render.ts';

describe('GitOpsDeployment name of a binding component', () => {
  it('is <binding>-<application>-<environment>-<component> when it fits in 250 characters', () => {
    assert.equal(
      gitOpsDeploymentName('appa-staging-binding', 'new-demo-app', 'staging', 'component-a'),
      'appa-staging-binding-new-demo-app-staging-component-a',
    );
  });

  it('falls back to <binding>-<component> when the full name is longer (63/63/111 characters)', () => {
    const binding = 'b'.repeat(111);
    assert.equal(
      gitOpsDeploymentName(binding, 'a'.repeat(63), 'e'.repeat(63), 'component-a'),
      `${binding}-component-a`,
    );
  });

  it('falls back to 180 characters, "-" and the SHA-256 of the full name when both are too long', () => {
    const binding = 'b'.repeat(187);
    const application = 'a'.repeat(63);
    const component = 'c'.repeat(63);
    const name = gitOpsDeploymentName(binding, application, 'staging', component);
    const full = `${binding}-${application}-staging-${component}`;
    assert.equal(name.length, 245);
    assert.equal(
      name,
      `${`${binding}-${component}`.slice(0, 180)}-${createHash('sha256').update(full).digest('hex')}`,
    );
  });
});

describe('binding status roll-up', () => {
  const entry = (componentName: string, syncStatus: string) => ({
    componentName,
    gitopsDeployment: componentName,
    syncStatus,
    health: '',
    commitID: '',
  });
  const now = new Date('2026-01-01T00:00:00Z');

  it('says how many components are Synced ("1 of 2 components deployed")', () => {
    const [c] = componentDeploymentConditions([], [entry('a', 'Synced'), entry('b', 'OutOfSync')], now);
    assert.deepEqual(
      { type: c?.type, status: c?.status, reason: c?.reason, message: c?.message },
      {
        type: 'AllComponentsDeployed',
        status: 'False',
        reason: 'CommitsUnsynced',
        message: '1 of 2 components deployed',
      },
    );
  });

  it('is True with CommitsSynced when every component is Synced', () => {
    const [c] = componentDeploymentConditions([], [entry('a', 'Synced'), entry('b', 'Synced')], now);
    assert.equal(c?.status, 'True');
    assert.equal(c?.reason, 'CommitsSynced');
    assert.equal(c?.message, '2 of 2 components deployed');
  });

  it('keeps the transition time when nothing changed', () => {
    const first = componentDeploymentConditions([], [entry('a', 'Synced')], now);
    const again = componentDeploymentConditions(
      first,
      [entry('a', 'Synced')],
      new Date('2026-01-02T00:00:00Z'),
    );
    assert.deepEqual(again, first);
  });

  it('finds a component named twice', () => {
    const c = (name: string) => ({ name, url: '', branch: '', path: '', commitID: '' });
    assert.equal(duplicateComponent([c('componentA'), c('b'), c('componentA')]), 'componentA');
    assert.equal(duplicateComponent([c('a'), c('b')]), undefined);
  });
});
