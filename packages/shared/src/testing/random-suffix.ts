import { randomBytes } from 'node:crypto';

/** Eight random hex characters: what makes a test's names (namespaces, shards, instances) its own. */
export const randomSuffix = () => randomBytes(4).toString('hex');
