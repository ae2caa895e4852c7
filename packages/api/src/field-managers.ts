/**
 * The server-side apply field managers of each process (`kubectl get -o yaml --show-managed-fields` shows who
 * owns what). The RHOAS operator's is its default; `RHOAS_FIELD_MANAGER` may change it.
 */
export const FieldManager = {
  Backend: 'gitops-backend',
  ClusterAgent: 'gitops-cluster-agent',
  /** The agent's sync requests and terminations (an Application's `operation`). */
  ClusterAgentSync: 'gitops-cluster-agent-sync',
  AppStudio: 'gitops-appstudio',
  RhoasOperator: 'rhoas-operator',
  /** The admin CLI: the Secret `kubectl gitops instances admit --secret` writes (docs/admin-cli.md). */
  Cli: 'kubectl-gitops',
} as const;
