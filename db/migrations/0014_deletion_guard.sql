-- Deletion guard (docs/deletion-guard.md): an agent deletes an Argo CD Application with cascading (Argo CD
-- prunes everything it deployed) only on proof that its GitOpsDeployment is gone, and never more of them at
-- once than a bounded share of an instance's or a tenant's Applications without an operator's word.
--
-- * application_deletion: the proof. The backend writes it in the transaction that deletes an application row
--   because the GitOpsDeployment was found gone by a live read (packages/db/src/application.repository.ts,
--   deleteApplication). A row that vanishes any other way (a database restored from a backup, a failover that
--   lost commits, a row deleted by hand, one the instance's role cannot see) leaves none. The agent stamps
--   pruned_at when it lets the delete go ahead; the stamps of the last window are the deletion budget's count.
-- * application_deletion_hold: an Application whose delete the agent refused, with why; an operator's
--   `kubectl gitops instances confirm-deletions` sets confirmed_at, and the agent then deletes it. The hold goes
--   when the Application is deleted or no longer needs to be (its row came back, it was adopted by a new row).

CREATE TABLE application_deletion (
  application_id uuid PRIMARY KEY,
  engine_instance_id uuid NOT NULL REFERENCES engine_instance (id) ON DELETE CASCADE,
  cluster_user_id uuid NOT NULL,
  application_name text NOT NULL,
  deleted_at timestamptz NOT NULL DEFAULT now(),
  pruned_at timestamptz
);
CREATE INDEX application_deletion_pruned_idx ON application_deletion (engine_instance_id, pruned_at)
  WHERE pruned_at IS NOT NULL;

CREATE TABLE application_deletion_hold (
  application_id uuid PRIMARY KEY,
  engine_instance_id uuid NOT NULL REFERENCES engine_instance (id) ON DELETE CASCADE,
  cluster_user_id uuid,
  application_name text NOT NULL,
  reason text NOT NULL CHECK (reason IN ('Unproven', 'InstanceBudget', 'TenantBudget')),
  message text NOT NULL,
  held_at timestamptz NOT NULL DEFAULT now(),
  confirmed_at timestamptz
);
CREATE INDEX application_deletion_hold_instance_idx ON application_deletion_hold (engine_instance_id);

-- An agent reads its instance's proofs, stamps and removes them; it reads, writes and removes its own holds
-- but cannot confirm one (confirmed_at is not granted).
ALTER TABLE application_deletion ENABLE ROW LEVEL SECURITY;
CREATE POLICY application_deletion_agent_all ON application_deletion FOR ALL
  USING (engine_instance_id = (SELECT gitops_agent_instance()))
  WITH CHECK (engine_instance_id = (SELECT gitops_agent_instance()));
ALTER TABLE application_deletion_hold ENABLE ROW LEVEL SECURITY;
CREATE POLICY application_deletion_hold_agent_all ON application_deletion_hold FOR ALL
  USING (engine_instance_id = (SELECT gitops_agent_instance()))
  WITH CHECK (engine_instance_id = (SELECT gitops_agent_instance()) AND confirmed_at IS NULL);

-- The grants of 0013, with the new tables; applied again to every role admitted before this migration.
CREATE OR REPLACE FUNCTION gitops_grant_engine_instance_role(p_role text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), p_role);
  EXECUTE format('GRANT SELECT ON engine_instance, cluster_user, application, application_state, sync_operation,'
    ' managed_environment, cluster_credentials, repository_credentials, api_cr_mapping, operation,'
    ' engine_instance_key, instance_sealed_value, application_deletion, application_deletion_hold,'
    ' kysely_migration, kysely_migration_lock TO %I', p_role);
  EXECUTE format('GRANT UPDATE (releasing_engine_instance_id) ON application TO %I', p_role);
  EXECUTE format('GRANT INSERT, UPDATE, DELETE ON application_state TO %I', p_role);
  EXECUTE format('GRANT UPDATE (requested_at, requested_application_uid, argocd_phase, synced_revision, started_at,'
    ' finished_at, argocd_message, outcome, outcome_message, updated_at) ON sync_operation TO %I', p_role);
  EXECUTE format('GRANT UPDATE (state, message, attempts, next_attempt_at, last_attempt_at, finished_at)'
    ' ON operation TO %I', p_role);
  EXECUTE format('GRANT DELETE ON operation TO %I', p_role);
  EXECUTE format('GRANT UPDATE (pruned_at), DELETE ON application_deletion TO %I', p_role);
  EXECUTE format('GRANT INSERT (application_id, engine_instance_id, cluster_user_id, application_name, reason,'
    ' message), DELETE ON application_deletion_hold TO %I', p_role);
  EXECUTE format('GRANT EXECUTE ON FUNCTION gitops_agent_register(text, text, text),'
    ' gitops_complete_application_release(uuid, uuid), gitops_agent_publish_key(text, bytea) TO %I', p_role);
END;
$$;
DO $$
DECLARE
  r text;
BEGIN
  FOR r IN SELECT db_role FROM engine_instance WHERE db_role IS NOT NULL LOOP
    PERFORM gitops_grant_engine_instance_role(r);
  END LOOP;
END;
$$;
