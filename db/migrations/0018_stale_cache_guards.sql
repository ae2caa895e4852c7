-- A backend replica whose cache is behind (its watch has not delivered a change yet) must not write what it
-- holds over what a replica that saw the change wrote. Two cases, both seen in test:chaos:
--
-- * A GitOpsDeployment deleted 0.1 s after its create got a second application row from the replica that had
--   not seen the delete, after the first had deleted its own: its Argo CD Application was created, synced and
--   deleted once more. Table deleted_cr holds the uids of the custom resources whose rows were deleted because
--   they are gone. The backend records one in the transaction that deletes the object's rows, where it holds
--   proof that the object is gone (the object is being deleted, or a live read made after the rows were read
--   found another uid of the name or none); creating an application for a recorded uid writes nothing. A uid is
--   never reused, so a recorded uid never comes back; rows older than a day are removed as new ones are
--   recorded (a cache further behind than that has relisted many times over).
--
-- * A replica that had not seen a GitOpsDeployment's edit, woken by the operation of that edit finishing,
--   wrote the previous spec back over the new one: the agent applied it, and a SyncRun requested meanwhile
--   synced the previous version. api_cr_mapping.cr_generation is the metadata.generation of the CR the row was
--   last written from; an older generation writes nothing. NULL: not known (rows written before this
--   migration, or kinds whose rows do not follow their spec this way).
--
-- Only the backend's role uses deleted_cr: no grant to any other role. The column is readable wherever
-- api_cr_mapping is, under the same row-level security.
--
-- Compatibility: a backend of the previous version neither records nor reads either, so during a rolling
-- upgrade the guards hold only between backends of this version. It inserts mappings without the column (NULL).
CREATE TABLE deleted_cr (
  cr_uid text PRIMARY KEY,
  deleted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX deleted_cr_deleted_at_idx ON deleted_cr (deleted_at);

ALTER TABLE api_cr_mapping ADD COLUMN cr_generation bigint;
