-- Credentials sealed for the engine instance that uses them (docs/threat-model.md). Each instance has its own
-- key pair; the private key never leaves the instance's cluster (a Secret in its Argo CD namespace, made by its
-- agent), the agent publishes the public key here, and the backend, which keeps the credentials sealed with its
-- own key (the *_sealed columns), seals for each instance what that instance needs with the instance's public
-- key (packages/db/src/instance-sealing.ts: HPKE). An agent holds no key that opens another instance's values.
--
-- * engine_instance_key: an instance's published public keys; sealing_key_id names the one the backend seals
--   with now (older ones stay while values sealed with them remain: rotation without downtime).
-- * key_rotation_requested_at: an operator asked for a new key (kubectl gitops instances rotate-key); the agent
--   makes one, publishes it and the request is cleared.
-- * instance_sealed_value: one credential field sealed for one instance. source_updated_at is the credential
--   row's updated_at when it was sealed, so an agent knows a value is current (equal) or not yet re-sealed.
--   Rows an instance no longer needs (its tenant moved away, its release done) are deleted by the backend.

ALTER TABLE engine_instance
  ADD COLUMN sealing_key_id text,
  ADD COLUMN key_rotation_requested_at timestamptz;

CREATE TABLE engine_instance_key (
  engine_instance_id uuid NOT NULL REFERENCES engine_instance (id) ON DELETE CASCADE,
  key_id text NOT NULL,
  public_key bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (engine_instance_id, key_id),
  CONSTRAINT engine_instance_key_length_check CHECK (octet_length(public_key) = 32)
);

CREATE TABLE instance_sealed_value (
  engine_instance_id uuid NOT NULL REFERENCES engine_instance (id) ON DELETE CASCADE,
  cluster_credentials_id uuid REFERENCES cluster_credentials (id) ON DELETE CASCADE,
  repository_credentials_id uuid REFERENCES repository_credentials (id) ON DELETE CASCADE,
  field text NOT NULL,
  key_id text NOT NULL,
  sealed bytea NOT NULL,
  source_updated_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT instance_sealed_value_one_row_check
    CHECK (num_nonnulls(cluster_credentials_id, repository_credentials_id) = 1),
  CONSTRAINT instance_sealed_value_field_check CHECK (CASE
    WHEN cluster_credentials_id IS NOT NULL THEN field = 'bearer_token'
    ELSE field IN ('username', 'password', 'ssh_private_key') END)
);
CREATE UNIQUE INDEX instance_sealed_value_key ON instance_sealed_value
  (engine_instance_id, coalesce(cluster_credentials_id, repository_credentials_id), field);
CREATE INDEX instance_sealed_value_cluster_credentials_idx ON instance_sealed_value (cluster_credentials_id)
  WHERE cluster_credentials_id IS NOT NULL;
CREATE INDEX instance_sealed_value_repository_credentials_idx ON instance_sealed_value (repository_credentials_id)
  WHERE repository_credentials_id IS NOT NULL;
CREATE TRIGGER instance_sealed_value_set_updated_at BEFORE UPDATE ON instance_sealed_value
  FOR EACH ROW EXECUTE FUNCTION gitops_set_updated_at();

ALTER TABLE engine_instance_key ENABLE ROW LEVEL SECURITY;
CREATE POLICY engine_instance_key_agent_read ON engine_instance_key FOR SELECT
  USING (engine_instance_id = (SELECT gitops_agent_instance()));
ALTER TABLE instance_sealed_value ENABLE ROW LEVEL SECURITY;
CREATE POLICY instance_sealed_value_agent_read ON instance_sealed_value FOR SELECT
  USING (engine_instance_id = (SELECT gitops_agent_instance()));

-- gitops_instance_sealing (the backend): what an instance needs sealed may have changed. Payload: `tenant:<id>`
-- (its credentials changed, or it was placed or moved, or one of its applications' release moved on) or
-- `instance:<id>` (a key was published): ids only.
CREATE FUNCTION gitops_notify_instance_sealing() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'engine_instance_key' THEN
    PERFORM pg_notify('gitops_instance_sealing', 'instance:' || NEW.engine_instance_id::text);
  ELSE
    PERFORM pg_notify('gitops_instance_sealing', 'tenant:' || NEW.cluster_user_id::text);
  END IF;
  RETURN NULL;
END;
$$;
CREATE TRIGGER cluster_credentials_notify_instance_sealing AFTER INSERT OR UPDATE ON cluster_credentials
  FOR EACH ROW EXECUTE FUNCTION gitops_notify_instance_sealing();
CREATE TRIGGER repository_credentials_notify_instance_sealing AFTER INSERT OR UPDATE ON repository_credentials
  FOR EACH ROW EXECUTE FUNCTION gitops_notify_instance_sealing();
CREATE FUNCTION gitops_notify_tenant_instance_sealing() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('gitops_instance_sealing', 'tenant:' || NEW.id::text);
  RETURN NULL;
END;
$$;
CREATE TRIGGER cluster_user_notify_instance_sealing AFTER UPDATE OF engine_instance_id ON cluster_user
  FOR EACH ROW WHEN (OLD.engine_instance_id IS DISTINCT FROM NEW.engine_instance_id)
  EXECUTE FUNCTION gitops_notify_tenant_instance_sealing();
CREATE TRIGGER application_notify_instance_sealing AFTER UPDATE OF releasing_engine_instance_id ON application
  FOR EACH ROW WHEN (OLD.releasing_engine_instance_id IS DISTINCT FROM NEW.releasing_engine_instance_id)
  EXECUTE FUNCTION gitops_notify_instance_sealing();
CREATE TRIGGER engine_instance_key_notify_instance_sealing AFTER INSERT ON engine_instance_key
  FOR EACH ROW EXECUTE FUNCTION gitops_notify_instance_sealing();

-- An agent publishes a public key of its own instance and makes it the one to seal with (idempotent: the same
-- key again changes nothing). Clears a rotation request.
CREATE FUNCTION gitops_agent_publish_key(p_key_id text, p_public_key bytea) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  me uuid := gitops_agent_instance();
BEGIN
  IF me IS NULL THEN
    RAISE EXCEPTION 'database role "%" is not the role of any admitted engine instance', session_user
      USING ERRCODE = '42501';
  END IF;
  INSERT INTO engine_instance_key (engine_instance_id, key_id, public_key) VALUES (me, p_key_id, p_public_key)
    ON CONFLICT (engine_instance_id, key_id) DO NOTHING;
  IF NOT EXISTS (SELECT 1 FROM engine_instance_key
                 WHERE engine_instance_id = me AND key_id = p_key_id AND public_key = p_public_key) THEN
    RAISE EXCEPTION 'engine instance key "%" was published before with another public key', p_key_id
      USING ERRCODE = '42501';
  END IF;
  UPDATE engine_instance SET sealing_key_id = p_key_id, key_rotation_requested_at = NULL
    WHERE id = me AND (sealing_key_id IS DISTINCT FROM p_key_id OR key_rotation_requested_at IS NOT NULL);
END;
$$;
REVOKE EXECUTE ON FUNCTION gitops_agent_publish_key(text, bytea) FROM PUBLIC;
-- As the security definer functions of 0012: this schema, then pg_temp (never a caller's temporary table).
DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION gitops_agent_publish_key(text, bytea) SET search_path = %I, pg_temp', current_schema());
END;
$$;

-- The grants of 0012, with the new tables; applied again to every role admitted before this migration.
CREATE OR REPLACE FUNCTION gitops_grant_engine_instance_role(p_role text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), p_role);
  EXECUTE format('GRANT SELECT ON engine_instance, cluster_user, application, application_state, sync_operation,'
    ' managed_environment, cluster_credentials, repository_credentials, api_cr_mapping, operation,'
    ' engine_instance_key, instance_sealed_value, kysely_migration, kysely_migration_lock TO %I', p_role);
  EXECUTE format('GRANT UPDATE (releasing_engine_instance_id) ON application TO %I', p_role);
  EXECUTE format('GRANT INSERT, UPDATE, DELETE ON application_state TO %I', p_role);
  EXECUTE format('GRANT UPDATE (requested_at, requested_application_uid, argocd_phase, synced_revision, started_at,'
    ' finished_at, argocd_message, outcome, outcome_message, updated_at) ON sync_operation TO %I', p_role);
  EXECUTE format('GRANT UPDATE (state, message, attempts, next_attempt_at, last_attempt_at, finished_at)'
    ' ON operation TO %I', p_role);
  EXECUTE format('GRANT DELETE ON operation TO %I', p_role);
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
