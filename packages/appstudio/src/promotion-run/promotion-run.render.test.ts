import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import {
  deploymentVerdicts,
  generatedBindingName,
  timeoutText,
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
