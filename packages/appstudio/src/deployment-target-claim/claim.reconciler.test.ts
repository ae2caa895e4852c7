import assert from 'node:assert/strict';
import { DeploymentTargetMessage } from '@gitops/api';
import { describe, it } from 'vitest';
import { cacheOf, claim, environment, target } from '../testing/unit.ts';
import { chooseTarget, deletingTargetOf, namesUsing } from './claim.reconciler.ts';

const named = (name: string, claimName: string, deleting = false) =>
  environment(
    name,
    { configuration: { target: { deploymentTargetClaim: { claimName } } } },
    deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {},
  );
const deleting = { deletionTimestamp: '2026-01-01T00:00:00Z' };

describe('binder step chooseTarget: what a claim that is not bound yet gets', () => {
  it('without a targetName: the matching target, bound by controller; none → provision', () => {
    const t = target('t', {}, { phase: 'Available' });
    assert.deepEqual(chooseTarget(claim('c'), cacheOf(t)), { kind: 'bind', target: t, byController: true });
    const otherClass = target('t', { deploymentTargetClassName: 'other' });
    assert.deepEqual(chooseTarget(claim('c'), cacheOf(otherClass)), { kind: 'provision' });
    assert.deepEqual(chooseTarget(claim('c'), cacheOf()), { kind: 'provision' });
  });

  it('a targetName that does not exist (or is being deleted): Pending without a condition', () => {
    assert.deepEqual(chooseTarget(claim('c', { targetName: 't' }), cacheOf()), { kind: 'pending' });
    const going = target('t', {}, {}, deleting);
    assert.deepEqual(chooseTarget(claim('c', { targetName: 't' }), cacheOf(going)), { kind: 'pending' });
  });

  it('a named target already naming the claim, or free and matching: bound (not by controller)', () => {
    const mine = target('t', { claimRef: 'c' }, { phase: 'Bound' });
    assert.deepEqual(chooseTarget(claim('c', { targetName: 't' }), cacheOf(mine)), {
      kind: 'bind',
      target: mine,
      byController: false,
    });
    const free = target('t');
    assert.deepEqual(chooseTarget(claim('c', { targetName: 't' }), cacheOf(free)), {
      kind: 'bind',
      target: free,
      byController: false,
    });
  });

  it("a named target another claim holds, or one that does not match: Pending with the condition's message", () => {
    const taken = target('t', { claimRef: 'someone-else' });
    assert.deepEqual(chooseTarget(claim('c', { targetName: 't' }), cacheOf(taken)), {
      kind: 'pending',
      error: DeploymentTargetMessage.WantsClaimedTarget,
    });
    const otherClass = target('t', { deploymentTargetClassName: 'other' });
    const choice = chooseTarget(claim('c', { targetName: 't' }), cacheOf(otherClass));
    assert.equal(choice.kind, 'pending');
    assert.match(
      choice.kind === 'pending' ? (choice.error ?? '') : '',
      new RegExp(DeploymentTargetMessage.ClassMismatch),
    );
  });
});

describe('binder step namesUsing: in-use protection', () => {
  it('names the Environments naming the claim, sorted, not those being deleted', () => {
    const environments = [named('b', 'c'), named('a', 'c'), named('x', 'other'), named('gone', 'c', true)];
    assert.deepEqual(namesUsing(claim('c'), environments), ['a', 'b']);
    assert.deepEqual(namesUsing(claim('free'), environments), []);
  });
});

describe('binder step deletingTargetOf: what a deleted Delete claim still waits for', () => {
  it('a target being deleted that names the claim (claimRef) or that the claim names', () => {
    const byRef = target('t1', { claimRef: 'c' }, {}, deleting);
    const byName = target('t2', {}, {}, deleting);
    assert.equal(deletingTargetOf(claim('c'), cacheOf(byRef)), byRef);
    assert.equal(deletingTargetOf(claim('c', { targetName: 't2' }), cacheOf(byName)), byName);
    assert.equal(deletingTargetOf(claim('c'), cacheOf(target('t1', { claimRef: 'c' }))), undefined);
    assert.equal(deletingTargetOf(claim('c'), cacheOf(byName)), undefined);
  });
});
