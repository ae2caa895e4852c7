-- Moving a tenant between engine instances (docs/architecture.md, "Moving a tenant"). A move never prunes and
-- never lets two Argo CDs manage one application's resources: the application row points at its new instance
-- at once, and application.releasing_engine_instance_id names the instance that still holds the old Argo CD
-- Application until its agent has removed it without cascading. The new instance's agent creates the
-- Application only once that column is NULL again (the releasing agent clears it and announces the row to
-- the new instance in one transaction). RESTRICT: an instance cannot be removed while it still holds one.
ALTER TABLE application ADD COLUMN releasing_engine_instance_id uuid
  REFERENCES engine_instance (id) ON DELETE RESTRICT;
CREATE INDEX application_releasing_engine_instance_id_idx ON application (releasing_engine_instance_id)
  WHERE releasing_engine_instance_id IS NOT NULL;
