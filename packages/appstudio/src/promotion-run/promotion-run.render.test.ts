import assert from 'node:assert/strict';
import { DeploymentStrategy, PromotionRunMessage } from '@gitops/api';
import { describe, it } from 'vitest';
import { environment } from '../testing/unit.ts';
import {
  deploymentVerdicts,
  generatedBindingName,
  nextAutomatedEnvironment,
  timeoutText,
  waitingFor,
  withEnvironmentStatus,
} from './promotion-run.render.ts';

describe('PromotionRun pure parts', () => {
  it('names a generated binding <app>-<env>-generated-binding in lower case', () => {
    assert.equal(generatedBindingName('New-Demo-App', 'prod'), 'new-demo-app-prod-generated-binding');
  });

  it('hashes a generated binding name over 250 characters exactly as the original', () => {
    assert.equal(
      generatedBindingName('a'.repeat(126), 'b'.repeat(126)),
      'generated-environment-binding-593debab8b0260a4eff2338aa1a896f3f44db24e586378168ab62536e5732fe1',
    );
  });

  it('says the timeout in minutes as the original did, else as a duration', () => {
    assert.equal(timeoutText(600_000), '10 Minutes');
    assert.equal(timeoutText(20_000), '20s');
  });

  it('numbers environment steps in order and overwrites an existing one in place', () => {
    const one = withEnvironmentStatus([], 'dev', 'In Progress', 'x');
    const two = withEnvironmentStatus(one, 'stage', 'In Progress', 'y');
    const done = withEnvironmentStatus(two, 'dev', 'Success', 'z');
    assert.deepEqual(done, [
      { step: 1, environmentName: 'dev', status: 'Success', displayStatus: 'z' },
      { step: 2, environmentName: 'stage', status: 'In Progress', displayStatus: 'y' },
    ]);
  });

  it('counts a deployment done only when Synced and Healthy at the component commit (if any)', () => {
    const status = (sync: string, health: string, revision: string, commitID: string) => ({
      components: [
        {
          name: 'a',
          gitopsRepository: { url: 'u', branch: 'main', path: 'p', generatedResources: [], commitID },
        },
      ],
      gitopsDeployments: [
        { componentName: 'a', gitopsDeployment: 'd', syncStatus: sync, health, commitID: revision },
      ],
    });
    assert.deepEqual(deploymentVerdicts(status('Synced', 'Healthy', 'x', '')), [{ name: 'd', done: true }]);
    assert.deepEqual(deploymentVerdicts(status('Synced', 'Healthy', 'x', 'y')), [{ name: 'd', done: false }]);
    assert.deepEqual(deploymentVerdicts(status('Synced', 'Progressing', 'y', 'y')), [
      { name: 'd', done: false },
    ]);
    assert.deepEqual(deploymentVerdicts(status('', '', '', '')), [{ name: 'd', done: false }]);
  });
});

describe('PromotionRun step helpers', () => {
  const verdict = (name: string, done: boolean) => ({ name, done });

  it('waitingFor: every deployment of the binding is awaited until all exist, then the ones not done', () => {
    assert.equal(waitingFor([], 2), PromotionRunMessage.WaitingForDeployments);
    assert.equal(waitingFor([verdict('a', true)], 2), PromotionRunMessage.WaitingForDeployments);
    assert.equal(
      waitingFor([verdict('a', true), verdict('b', false)], 2),
      PromotionRunMessage.waitingFor(['b']),
    );
    assert.equal(waitingFor([verdict('a', true), verdict('b', true)], 2), undefined);
  });

  it('nextAutomatedEnvironment: the first by name whose parent is done, automated, not started yet', () => {
    const env = (
      name: string,
      parentEnvironment: string,
      deploymentStrategy: string = DeploymentStrategy.AppStudioAutomated,
    ) => environment(name, { parentEnvironment, deploymentStrategy });
    const environments = [
      env('staging-b', 'dev'),
      env('staging-a', 'dev'),
      env('manual', 'dev', 'Manual'),
      env('prod', 'staging-a'),
    ];
    assert.equal(nextAutomatedEnvironment(environments, new Set(['dev']), new Set(['dev'])), 'staging-a');
    assert.equal(
      nextAutomatedEnvironment(environments, new Set(['dev']), new Set(['dev', 'staging-a'])),
      'staging-b',
    );
    assert.equal(
      nextAutomatedEnvironment(
        environments,
        new Set(['dev', 'staging-a']),
        new Set(['dev', 'staging-a', 'staging-b']),
      ),
      'prod',
    );
    assert.equal(nextAutomatedEnvironment(environments, new Set(['prod']), new Set(['prod'])), undefined);
  });
});
