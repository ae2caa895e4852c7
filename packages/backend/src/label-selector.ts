/**
 * Equality-based label selectors (`a=b,c!=d,e,!f`), used to shard or isolate the GitOpsDeployments one
 * backend serves. The informer sends the selector to the API server; this matcher applies the same rule to
 * objects read directly (e.g. confirming that a deployment is really gone).
 */

type Requirement =
  | { op: 'equals'; key: string; value: string }
  | { op: 'notEquals'; key: string; value: string }
  | { op: 'exists'; key: string }
  | { op: 'notExists'; key: string };

export interface LabelSelector {
  readonly text: string;
  matches(labels: Readonly<Record<string, string>> | undefined): boolean;
}

const labelKey = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const labelValue = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/** Parses an equality-based selector. @throws Error naming the bad requirement. */
export function parseLabelSelector(text: string): LabelSelector {
  const requirements: Requirement[] = [];
  for (const raw of text.split(',')) {
    const part = raw.trim();
    if (part === '') continue;
    let requirement: Requirement;
    const match = /^([^!=]+?)\s*(==|=|!=)\s*(.*)$/.exec(part);
    if (match) {
      const [, key = '', operator, value = ''] = match;
      requirement =
        operator === '!='
          ? { op: 'notEquals', key, value: value.trim() }
          : { op: 'equals', key, value: value.trim() };
      if (!labelValue.test(requirement.value)) throw new Error(`invalid label value in selector: ${part}`);
    } else if (part.startsWith('!')) {
      requirement = { op: 'notExists', key: part.slice(1).trim() };
    } else {
      requirement = { op: 'exists', key: part };
    }
    if (!labelKey.test(requirement.key)) throw new Error(`invalid label selector requirement: ${part}`);
    requirements.push(requirement);
  }
  return {
    text,
    matches(labels = {}) {
      return requirements.every((r) => {
        const value = Object.hasOwn(labels, r.key) ? labels[r.key] : undefined;
        switch (r.op) {
          case 'equals':
            return value === r.value;
          case 'notEquals':
            return value !== r.value;
          case 'exists':
            return value !== undefined;
          default:
            return value === undefined;
        }
      });
    },
  };
}
