-- The uid of the Argo CD Application the cluster-agent asked to sync (set with requested_at). An Application
-- can be deleted and re-created under the same name while a sync runs (e.g. its row was lost with an
-- uncommitted-to-disk transaction and written again): what the old one reports is not this sync's result,
-- and the request is made again on the Application that now serves the deployment. NULL for rows requested
-- before this column existed (taken to be the live Application's).
ALTER TABLE sync_operation ADD COLUMN requested_application_uid text;
