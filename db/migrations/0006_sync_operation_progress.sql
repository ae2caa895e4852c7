-- What Argo CD reports about one sync (status.operationState of the Application, matched to this row by the
-- request's operation.info), so a GitOpsDeploymentSyncRun can say where its sync is and how it ended:
--   argocd_phase     Argo CD's phase (Running, Terminating, Succeeded, Failed, Error); NULL until Argo CD
--                    reports this sync. Not constrained: a newer Argo CD may add phases.
--   synced_revision  syncResult.revision, the commit actually synced ('' until known)
--   started_at       operationState.startedAt
--   finished_at      operationState.finishedAt; for a sync that ended without Argo CD (terminated before it
--                    was requested, Application gone) the time the agent ended it
--   argocd_message   Argo CD's latest message while it runs (secrets scrubbed; the final one is outcome_message)
ALTER TABLE sync_operation
  ADD COLUMN argocd_phase text,
  ADD COLUMN synced_revision text NOT NULL DEFAULT '',
  ADD COLUMN started_at timestamptz,
  ADD COLUMN finished_at timestamptz,
  ADD COLUMN argocd_message text NOT NULL DEFAULT '';

-- gitops_sync_operation_changed (payload sync_operation id): the backend rewrites the SyncRun's status. Only
-- what the SyncRun shows wakes it; the agent writes these columns only when Argo CD's report changed.
CREATE FUNCTION gitops_notify_sync_operation_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('gitops_sync_operation_changed', NEW.id::text);
  RETURN NULL;
END;
$$;
CREATE TRIGGER sync_operation_notify_changed AFTER UPDATE ON sync_operation
  FOR EACH ROW WHEN (
    OLD.requested_at IS DISTINCT FROM NEW.requested_at
    OR OLD.argocd_phase IS DISTINCT FROM NEW.argocd_phase
    OR OLD.synced_revision IS DISTINCT FROM NEW.synced_revision
    OR OLD.started_at IS DISTINCT FROM NEW.started_at
    OR OLD.finished_at IS DISTINCT FROM NEW.finished_at
    OR OLD.argocd_message IS DISTINCT FROM NEW.argocd_message
    OR OLD.outcome IS DISTINCT FROM NEW.outcome
    OR OLD.outcome_message IS DISTINCT FROM NEW.outcome_message
  )
  EXECUTE FUNCTION gitops_notify_sync_operation_changed();
