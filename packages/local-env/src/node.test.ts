import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { containerdImageName } from './node.ts';

describe('containerdImageName', () => {
  it("gives Docker's short names the full name containerd imports them under", () => {
    assert.equal(containerdImageName('gitops-service/pause:local'), 'docker.io/gitops-service/pause:local');
    assert.equal(containerdImageName('redis:7'), 'docker.io/library/redis:7');
    assert.equal(containerdImageName('redis'), 'docker.io/library/redis:latest');
    assert.equal(containerdImageName('team/web'), 'docker.io/team/web:latest');
  });

  it('leaves names that start with a host as they are', () => {
    assert.equal(containerdImageName('images.example:5000/web:1'), 'images.example:5000/web:1');
    assert.equal(containerdImageName('localhost/web:1'), 'localhost/web:1');
    assert.equal(containerdImageName('images.example/shop/web:2'), 'images.example/shop/web:2');
  });
});
