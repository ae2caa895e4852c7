-- When the cluster-agent set the Argo CD Application's `operation` for this sync (NULL: not requested yet).
-- It makes the request happen exactly once (also across agent restarts) and lets the agent tell the result
-- of this sync in status.operationState from an earlier one.
ALTER TABLE sync_operation ADD COLUMN requested_at timestamptz;
