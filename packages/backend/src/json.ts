/**
 * The JSON helpers live in @gitops/shared (`json.ts`: `jsonEqual`, `createMergePatch`, `normalizeJson`,
 * `isJsonObject`); this re-export keeps the backend's older imports working until they import the package.
 */
export {
  createMergePatch,
  isJsonObject,
  type JsonObject,
  type JsonValue,
  jsonEqual,
  normalizeJson,
} from '@gitops/shared';
