-- A tenant whose engine instance runs on another cluster than the tenant's namespace deploys its
-- GitOpsDeployments without an environment through credentials scoped to that namespace (a ServiceAccount
-- bound to the namespace's `admin` role, docs/engine-instances.md): its Workspace environment then has a
-- cluster_credentials row, which the agent turns into an Argo CD cluster Secret as it does for an External
-- environment. On an instance of the tenant's own cluster it has none (in-cluster, as before). An External
-- environment still always has credentials.
-- Compatibility: code of the previous version never stores credentials on a Workspace environment and never
-- places a Workspace deployment on another cluster, so it keeps working against this schema.
ALTER TABLE managed_environment DROP CONSTRAINT managed_environment_credentials_check;
ALTER TABLE managed_environment ADD CONSTRAINT managed_environment_credentials_check
  CHECK (kind = 'Workspace' OR cluster_credentials_id IS NOT NULL);
