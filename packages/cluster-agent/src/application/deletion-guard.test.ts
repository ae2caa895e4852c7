import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { budgetLimit, holdingBudget, holdMessage } from './deletion-guard.ts';

const budget = { windowMs: 600_000, percent: 10, min: 50, tenantPercent: 50, tenantMin: 25 };
const counts = (instance: [number, number, boolean], tenant: [number, number, boolean]) => ({
  instance: { deleted: instance[0], live: instance[1], spent: instance[2] },
  tenant: { deleted: tenant[0], live: tenant[1], spent: tenant[2] },
});

describe('deletion budgets', () => {
  it('the larger of the floor and the share of what was there when the window began', () => {
    assert.equal(budgetLimit(100, 10, 50), 50);
    assert.equal(budgetLimit(5_000, 10, 50), 500);
    assert.equal(budgetLimit(999, 10, 0), 99);
  });

  it('a delete within both budgets is not held; the one past the instance budget is, with its figures', () => {
    assert.equal(holdingBudget(budget, counts([49, 400, false], [0, 3, false])), undefined);
    // 50 of the 450 there when the window began: the 51st goes beyond max(50, 45).
    assert.deepEqual(holdingBudget(budget, counts([50, 400, false], [0, 3, false])), {
      reason: 'InstanceBudget',
      limit: 50,
      total: 450,
    });
    // A large instance: 10 % of 5,000.
    assert.equal(holdingBudget(budget, counts([499, 4_501, false], [0, 3, false])), undefined);
  });

  it("a tenant's budget holds its own deletes only", () => {
    // 30 of a tenant's 60: max(25, 50 %) = 30 spent.
    assert.deepEqual(holdingBudget(budget, counts([30, 100, false], [30, 30, false])), {
      reason: 'TenantBudget',
      limit: 30,
      total: 60,
    });
    // A small tenant deletes everything it has without anyone asked (the floor).
    assert.equal(holdingBudget(budget, counts([10, 100, false], [24, 1, false])), undefined);
  });

  it('a spent budget holds every further delete of its scope, even one that would fit again', () => {
    assert.equal(holdingBudget(budget, counts([0, 100, true], [0, 1, false]))?.reason, 'InstanceBudget');
    assert.equal(holdingBudget(budget, counts([0, 100, false], [0, 1, true]))?.reason, 'TenantBudget');
  });

  it('the messages name the Application, the figures and the command, never more', () => {
    const message = holdMessage(
      'InstanceBudget',
      { id: 'row-1', name: 'gitopsdepl-a' },
      { limit: 50, total: 450, windowMs: 600_000 },
    );
    assert.match(
      message,
      /^Application gitopsdepl-a is not deleted: the instance has deleted 50 of its 450 Applications within 10m/,
    );
    assert.match(message, /kubectl gitops instances confirm-deletions <instance>/);
    assert.match(holdMessage('Unproven', { id: 'row-1', name: 'gitopsdepl-a' }), /row row-1 is gone/);
  });
});
