-- A refresh of an application's Argo CD Application, asked by the backend (issue 34 item 4: a promotion waits
-- for nothing). Argo CD re-reads Git on its own only when an Application's spec changes or every
-- timeout.reconciliation (180 s by default); a commit pushed to the branch an unchanged Application follows (the
-- GitOps repository render of a promotion) or new credentials for its repository (a RepositoryCredential
-- changed) would wait for that poll. The backend sets `refresh_requested_at` in the transaction that inserts the
-- application's operation (application-refresh.repository.ts); the agent, reconciling it, sets Argo CD's
-- `argocd.argoproj.io/refresh: normal` annotation once per request and records the request it served on the
-- Application (annotation `managed-gitops.redhat.com/refresh-served`), so it never asks twice for one request.
--
-- Asking for a refresh is not a change of the desired Application: `updated_at` (the row version the agent
-- records on the Application, application.reconciler.ts) moves only when another column is written, so a
-- refresh costs the agent one patch and no re-apply.
--
-- Compatibility: code of the previous version never writes the column and reads rows with `SELECT *`, which
-- ignores it (an agent of that version serves no refresh: Argo CD's poll does, as before). The agent's role
-- reads `application` with a table-wide SELECT grant (0012, 0014): the column is readable under the same
-- row-level security as the rest of the row.
ALTER TABLE application ADD COLUMN refresh_requested_at timestamptz;

DROP TRIGGER application_set_updated_at ON application;
CREATE TRIGGER application_set_updated_at
  BEFORE UPDATE OF id, name, cluster_user_id, engine_instance_id, managed_environment_id, spec, created_at,
    releasing_engine_instance_id ON application
  FOR EACH ROW EXECUTE FUNCTION gitops_set_updated_at();
