/**
 * JSON helpers: semantic equality of JSON documents (key order and `undefined` members do not matter)
 * and RFC 7386 merge patches computed from two documents.
 */
import { isDeepStrictEqual } from 'node:util';

export type JsonObject = { [key: string]: JsonValue };
export type JsonValue = string | number | boolean | null | JsonValue[] | JsonObject;

export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The member at `path` of a parsed JSON document (undefined where a step is missing or not an object). */
export function jsonField(document: unknown, ...path: string[]): unknown {
  let current = document;
  for (const key of path) current = isJsonObject(current) ? current[key] : undefined;
  return current;
}

/**
 * The JSON value a document becomes on the wire: `undefined` members dropped, and `null` members of
 * objects dropped too (a JSON merge patch cannot store them, and the API server prunes them).
 */
export function normalizeJson(value: unknown): JsonValue | undefined {
  if (value === undefined) return undefined;
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (Array.isArray(value)) return value.map((item) => normalizeJson(item) ?? null);
  if (isJsonObject(value)) {
    const result: JsonObject = {};
    for (const [key, member] of Object.entries(value)) {
      const normalized = normalizeJson(member);
      if (normalized !== undefined && normalized !== null) result[key] = normalized;
    }
    return result;
  }
  return undefined;
}

/** True when both documents are the same JSON (deep equality of the parsed values, key order ignored). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return isDeepStrictEqual(normalizeJson(a), normalizeJson(b));
}

/**
 * A string two documents share exactly when jsonEqual finds them equal (normalized, keys sorted): a cheap key
 * for "has this changed since" memos that keep strings instead of documents.
 */
export function jsonFingerprint(value: unknown): string {
  return canonical(normalizeJson(value));
}

function canonical(value: JsonValue | undefined): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (isJsonObject(value)) {
    const entries = Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical(value[key] as JsonValue)}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * The JSON merge patch (RFC 7386) that turns `source` into `target`; `undefined` when they are equal.
 * Objects are patched member by member (removed members become `null`); anything else is replaced.
 * `target` must be normalized (no `null` members), since `null` means "remove" in a merge patch.
 */
export function createMergePatch(source: unknown, target: unknown): JsonValue | undefined {
  const from = normalizeJson(source);
  const to = normalizeJson(target);
  if (to === undefined) return from === undefined ? undefined : null;
  if (!isJsonObject(from) || !isJsonObject(to)) return isDeepStrictEqual(from, to) ? undefined : to;
  const patch: JsonObject = {};
  for (const [key, value] of Object.entries(to)) {
    const member = key in from ? createMergePatch(from[key], value) : value;
    if (member !== undefined) patch[key] = member;
  }
  for (const key of Object.keys(from)) if (!(key in to)) patch[key] = null;
  return Object.keys(patch).length === 0 ? undefined : patch;
}
