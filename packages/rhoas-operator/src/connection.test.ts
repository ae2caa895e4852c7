/**
 * The binding Secret's name (packages/rhoas-operator/README.md, "Binding Secrets"): every valid connection
 * name gives a valid Secret name (a DNS-1123 subdomain of at most 253 characters), one of its own per kind
 * and per name, and a KafkaConnection keeps today's `<name>-binding` whenever that fits.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { bindingSecretName, type ConnectionKindName } from './connection.ts';
import { isSecretName } from './processing.ts';

const KAFKA = 'KafkaConnection';
const REGISTRY = 'ServiceRegistryConnection';
const KINDS: ConnectionKindName[] = [KAFKA, REGISTRY];

/** A small deterministic generator (no Math.random: a failure must be reproducible). */
function generator(seed: number) {
  let state = seed >>> 0;
  return (n: number) => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    return state % n;
  };
}

/** A random valid CR name (a DNS-1123 subdomain) of exactly `length` characters. */
function randomName(next: (n: number) => number, length: number): string {
  const alnum = 'abcdefghijklmnopqrstuvwxyz0123456789';
  let name = '';
  while (name.length < length) {
    const left = length - name.length;
    const last = name.at(-1);
    // The first and the last character, and those next to a '.', are alphanumeric; '-' may repeat.
    const separatorAllowed = name !== '' && left > 1 && last !== '.';
    const pick = next(10);
    if (separatorAllowed && pick === 0) name += '.';
    else if (separatorAllowed && pick <= 2 && last !== undefined) name += '-';
    else name += alnum[next(alnum.length)];
  }
  // A '-' just before a '.' would make the name invalid: the generator never puts one there.
  return name.replace(/-\./g, 'a.').replace(/-$/, 'a');
}

describe('bindingSecretName', () => {
  it('keeps <name>-binding for a KafkaConnection, and gives a ServiceRegistryConnection <name>-binding-registry', () => {
    assert.equal(bindingSecretName(KAFKA, 'orders'), 'orders-binding');
    assert.equal(bindingSecretName(REGISTRY, 'schemas'), 'schemas-binding-registry');
    // The longest names that fit are kept whole.
    assert.equal(bindingSecretName(KAFKA, 'k'.repeat(245)), `${'k'.repeat(245)}-binding`);
    assert.equal(bindingSecretName(REGISTRY, 'r'.repeat(236)), `${'r'.repeat(236)}-binding-registry`);
  });

  it('gives the two kinds different Secrets for the same name, and for names that end like the other kind', () => {
    for (const name of ['orders', 'x-registry', 'x-binding', 'x-binding-registry', 'a.b', 'd'.repeat(253)]) {
      assert.notEqual(bindingSecretName(KAFKA, name), bindingSecretName(REGISTRY, name), name);
    }
    // A KafkaConnection named "x-registry" and a ServiceRegistryConnection named "x" do not meet.
    assert.notEqual(bindingSecretName(KAFKA, 'x-registry'), bindingSecretName(REGISTRY, 'x'));
    assert.notEqual(bindingSecretName(KAFKA, 'x-binding-registry'), bindingSecretName(REGISTRY, 'x'));
    assert.notEqual(bindingSecretName(REGISTRY, 'x-binding'), bindingSecretName(KAFKA, 'x'));
  });

  it('cuts a name that does not fit, never before a "." or a "-", and appends a hash of the whole name', () => {
    const issue = `${'d'.repeat(244)}.${'e'.repeat(8)}`; // 253 characters, a valid CR name
    for (const kind of KINDS) {
      const name = bindingSecretName(kind, issue);
      assert.ok(isSecretName(name), `${kind}: ${name}`);
      assert.ok(name.length <= 253);
      assert.match(name, /^d+-[0-9a-f]{10}-binding(-registry)?$/);
    }
    // Cuts that would end in "-", "--", "." or ".-"-like runs are trimmed back to an alphanumeric.
    for (const filler of ['-', '--', '---------', '.', '.a.', '-.']) {
      for (let at = 200; at <= 240; at++) {
        const head = 'a'.repeat(at);
        const candidate = `${head}${filler}${'b'.repeat(253)}`.slice(0, 253).replace(/[-.]+$/, '');
        if (!isSecretName(candidate)) continue; // e.g. "-." is not valid inside a name
        for (const kind of KINDS) {
          const secret = bindingSecretName(kind, candidate);
          assert.ok(isSecretName(secret), `${kind} ${filler}@${at}: ${secret}`);
        }
      }
    }
  });

  it('gives different long names that share their first 240 characters different Secrets', () => {
    const head = 'p'.repeat(240);
    const names = ['a', 'b', 'c.d', 'c-d', 'zzzzzzzzzzzzz'].map((tail) => `${head}${tail}`);
    for (const kind of KINDS) {
      const secrets = names.map((n) => bindingSecretName(kind, n));
      assert.equal(new Set(secrets).size, names.length, kind);
    }
  });

  it('is a function: the same name always gives the same Secret', () => {
    const name = `${'q'.repeat(250)}.zz`;
    assert.equal(bindingSecretName(KAFKA, name), bindingSecretName(KAFKA, name));
  });

  it('gives every valid name of any length a valid Secret name of its own, per kind (3,000 random names)', () => {
    const next = generator(25);
    const names = new Set<string>(['a', '0', 'a.b', 'a-b', `${'0'.repeat(253)}`]);
    for (let i = 0; i < 3_000; i++) {
      // Lengths crowd around where the cut begins (244–246 for Kafka, 235–237 for registries) and 253.
      const length = [1 + next(253), 230 + next(24), 253][next(3)] ?? 253;
      names.add(randomName(next, length));
    }
    const seen = new Map<string, string>();
    for (const name of names) {
      assert.ok(isSecretName(name), `the generator made an invalid name: ${name}`);
      for (const kind of KINDS) {
        const secret = bindingSecretName(kind, name);
        assert.ok(isSecretName(secret), `${kind} ${name} → ${secret}`);
        const other = seen.get(secret);
        assert.equal(other, undefined, `${kind} ${name} and ${other} both give ${secret}`);
        seen.set(secret, `${kind} ${name}`);
      }
    }
  });
});
