-- Each engine instance is a trust domain (docs/threat-model.md): its agent connects with a database role of its
-- own, bound to its engine_instance row, and PostgreSQL itself lets that role see and change only what the
-- instance serves. The backend's role owns the tables, so row-level security does not apply to it (tables are
-- not FORCE'd); every other role sees only what a policy below grants it, which for a role bound to no
-- instance is nothing.
--
-- * engine_instance.db_role: the login role of the instance's agents, set when an operator admits the
--   instance (packages/db/src/engine-instance-role.repository.ts, `kubectl gitops instances admit`).
-- * gitops_agent_instance(): the instance of the session's login role (session_user, so a security-definer
--   function called by an agent still answers for the agent), NULL for any other role.
-- * The policies name the instance through `(SELECT gitops_agent_instance())`: one evaluation per statement.
--   A policy that looks at another table does so with a correlated EXISTS on an indexed column, never with
--   `IN (SELECT ...)` over the instance's rows: that would be a hashed scan of every application of the instance
--   on every statement, O(deployments) per read.
-- * Where an agent must act beyond its own rows (hand a released application to the instance it moved to,
--   register its namespace and cluster), it calls a security-definer function that checks who it is.
-- * Grants are given per role at admission by gitops_grant_engine_instance_role (one place; a migration that
--   adds a table an agent reads re-runs it for every admitted role).
--
-- Compatibility: the 0.1.0 agent connects with the backend's role and is not affected (row-level security does
-- not apply to the tables' owner); docs/upgrades.md says how an operator moves each instance to its own role.

ALTER TABLE engine_instance ADD COLUMN db_role text;
ALTER TABLE engine_instance ADD CONSTRAINT engine_instance_db_role_key UNIQUE (db_role);

-- Security definer functions must not resolve a name through the caller's search path: any role may create a
-- temporary table, and pg_temp is searched first for tables unless placed last. So this one, called by every
-- policy, names its table with the schema (written at migration time; no SET clause, which would cost a
-- configuration save and restore on each call), and the others run with `search_path = <schema>, pg_temp`
-- (set at the end of this file). The hostile-agent suite creates such a temporary table.
DO $$
BEGIN
  EXECUTE format($f$
    CREATE FUNCTION gitops_agent_instance() RETURNS uuid
    LANGUAGE sql STABLE SECURITY DEFINER AS 'SELECT id FROM %I.engine_instance WHERE db_role = session_user'
  $f$, current_schema());
END;
$$;

-- engine_instance: its own row only; written only through gitops_agent_register.
ALTER TABLE engine_instance ENABLE ROW LEVEL SECURITY;
CREATE POLICY engine_instance_agent_read ON engine_instance FOR SELECT
  USING (id = (SELECT gitops_agent_instance()));

-- application: the rows placed on the instance and those it still releases in a move. The only change an
-- agent makes itself is ending an adoption (releasing_engine_instance_id: its own id → NULL).
ALTER TABLE application ENABLE ROW LEVEL SECURITY;
CREATE POLICY application_agent_read ON application FOR SELECT
  USING (engine_instance_id = (SELECT gitops_agent_instance())
    OR releasing_engine_instance_id = (SELECT gitops_agent_instance()));
CREATE POLICY application_agent_adopt ON application FOR UPDATE
  USING (engine_instance_id = (SELECT gitops_agent_instance())
    AND releasing_engine_instance_id = (SELECT gitops_agent_instance()))
  WITH CHECK (engine_instance_id = (SELECT gitops_agent_instance()) AND releasing_engine_instance_id IS NULL);

-- cluster_user: the tenants placed on the instance, and those whose applications it still releases.
ALTER TABLE cluster_user ENABLE ROW LEVEL SECURITY;
CREATE POLICY cluster_user_agent_read ON cluster_user FOR SELECT
  USING (engine_instance_id = (SELECT gitops_agent_instance())
    OR EXISTS (SELECT 1 FROM application a WHERE a.cluster_user_id = cluster_user.id
               AND a.releasing_engine_instance_id = (SELECT gitops_agent_instance())));

-- application_state: only the instance holding an application's Argo CD Application reports its status (the
-- releasing one during a move, else its own: application-state.repository.ts).
ALTER TABLE application_state ENABLE ROW LEVEL SECURITY;
CREATE POLICY application_state_agent_all ON application_state FOR ALL
  USING (EXISTS (SELECT 1 FROM application a WHERE a.id = application_state.application_id
    AND coalesce(a.releasing_engine_instance_id, a.engine_instance_id) = (SELECT gitops_agent_instance())))
  WITH CHECK (EXISTS (SELECT 1 FROM application a WHERE a.id = application_state.application_id
    AND coalesce(a.releasing_engine_instance_id, a.engine_instance_id) = (SELECT gitops_agent_instance())));

-- sync_operation: those of the instance's tenants and applications.
ALTER TABLE sync_operation ENABLE ROW LEVEL SECURITY;
CREATE POLICY sync_operation_agent_read ON sync_operation FOR SELECT
  USING (EXISTS (SELECT 1 FROM cluster_user u WHERE u.id = sync_operation.cluster_user_id
                 AND u.engine_instance_id = (SELECT gitops_agent_instance()))
    OR EXISTS (SELECT 1 FROM application a WHERE a.id = sync_operation.application_id
               AND (a.engine_instance_id = (SELECT gitops_agent_instance())
                    OR a.releasing_engine_instance_id = (SELECT gitops_agent_instance()))));
CREATE POLICY sync_operation_agent_update ON sync_operation FOR UPDATE
  USING (EXISTS (SELECT 1 FROM cluster_user u WHERE u.id = sync_operation.cluster_user_id
                 AND u.engine_instance_id = (SELECT gitops_agent_instance()))
    OR EXISTS (SELECT 1 FROM application a WHERE a.id = sync_operation.application_id
               AND (a.engine_instance_id = (SELECT gitops_agent_instance())
                    OR a.releasing_engine_instance_id = (SELECT gitops_agent_instance()))));

-- managed_environment and cluster_credentials: the environments of the instance's tenants, and those its
-- applications (held or still being released) target. Unplaced tenants' environments are no instance's.
ALTER TABLE managed_environment ENABLE ROW LEVEL SECURITY;
CREATE POLICY managed_environment_agent_read ON managed_environment FOR SELECT
  USING (EXISTS (SELECT 1 FROM cluster_user u WHERE u.id = managed_environment.cluster_user_id
                 AND u.engine_instance_id = (SELECT gitops_agent_instance()))
    OR EXISTS (SELECT 1 FROM application a WHERE a.managed_environment_id = managed_environment.id
               AND (a.engine_instance_id = (SELECT gitops_agent_instance())
                    OR a.releasing_engine_instance_id = (SELECT gitops_agent_instance()))));
ALTER TABLE cluster_credentials ENABLE ROW LEVEL SECURITY;
CREATE POLICY cluster_credentials_agent_read ON cluster_credentials FOR SELECT
  USING (EXISTS (SELECT 1 FROM managed_environment e WHERE e.cluster_credentials_id = cluster_credentials.id));

-- repository_credentials: those placed on the instance.
ALTER TABLE repository_credentials ENABLE ROW LEVEL SECURITY;
CREATE POLICY repository_credentials_agent_read ON repository_credentials FOR SELECT
  USING (engine_instance_id = (SELECT gitops_agent_instance()));

-- api_cr_mapping: the owner (namespace/name) of the instance's applications.
ALTER TABLE api_cr_mapping ENABLE ROW LEVEL SECURITY;
CREATE POLICY api_cr_mapping_agent_read ON api_cr_mapping FOR SELECT
  USING (EXISTS (SELECT 1 FROM application a WHERE a.id = api_cr_mapping.application_id));

-- operation: the instance's own; it runs them (state columns) and deletes them past retention.
ALTER TABLE operation ENABLE ROW LEVEL SECURITY;
CREATE POLICY operation_agent_read ON operation FOR SELECT
  USING (engine_instance_id = (SELECT gitops_agent_instance()));
CREATE POLICY operation_agent_update ON operation FOR UPDATE
  USING (engine_instance_id = (SELECT gitops_agent_instance()))
  WITH CHECK (engine_instance_id = (SELECT gitops_agent_instance()));
CREATE POLICY operation_agent_delete ON operation FOR DELETE
  USING (engine_instance_id = (SELECT gitops_agent_instance()) AND finished_at IS NOT NULL);

-- An agent's registration: the row of its role, with the namespace it serves. The namespace name is the one the
-- operator admitted; the cluster is recorded on the first start and never changed by an agent afterwards (a
-- claim to be on another cluster would change where tenants are placed). A re-created namespace (new uid)
-- updates the row. Errors name the role and both values; nothing is written then.
CREATE FUNCTION gitops_agent_register(p_namespace_name text, p_namespace_uid text, p_cluster_identity text)
RETURNS SETOF engine_instance
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  mine engine_instance;
BEGIN
  SELECT * INTO mine FROM engine_instance WHERE db_role = session_user FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'database role "%" is not the role of any admitted engine instance', session_user
      USING ERRCODE = '42501';
  END IF;
  IF mine.namespace_name <> p_namespace_name THEN
    RAISE EXCEPTION 'engine instance "%" was admitted for Argo CD namespace "%"; this agent serves namespace "%"',
      mine.name, mine.namespace_name, p_namespace_name USING ERRCODE = '42501';
  END IF;
  IF mine.cluster_identity <> '' AND mine.cluster_identity <> p_cluster_identity THEN
    RAISE EXCEPTION 'engine instance "%" is registered on cluster %; this agent runs on cluster %',
      mine.name, mine.cluster_identity, p_cluster_identity USING ERRCODE = '42501';
  END IF;
  IF mine.cluster_identity = '' OR mine.namespace_uid <> p_namespace_uid THEN
    UPDATE engine_instance SET cluster_identity = p_cluster_identity, namespace_uid = p_namespace_uid
      WHERE id = mine.id RETURNING * INTO mine;
  END IF;
  RETURN NEXT mine;
END;
$$;

-- The old instance's agent has removed a moved application's Argo CD Application: the row is handed to the
-- instance it moved to, and that instance is told, in one transaction (packages/db/src/tenant-move.repository.ts).
-- An agent may hand over only what it releases itself; the backend's role may act for any instance.
CREATE FUNCTION gitops_complete_application_release(p_application_id uuid, p_engine_instance_id uuid)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  caller uuid := gitops_agent_instance();
  released record;
BEGIN
  IF caller IS NOT NULL AND caller <> p_engine_instance_id THEN
    RAISE EXCEPTION 'database role "%" acts only for its own engine instance', session_user
      USING ERRCODE = '42501';
  END IF;
  UPDATE application SET releasing_engine_instance_id = engine_instance_id
    WHERE id = p_application_id
      AND releasing_engine_instance_id = p_engine_instance_id
      AND engine_instance_id <> p_engine_instance_id
    RETURNING engine_instance_id, cluster_user_id INTO released;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO operation (engine_instance_id, resource_type, resource_id, owner_user_id)
    VALUES (released.engine_instance_id, 'Application', p_application_id, released.cluster_user_id)
    ON CONFLICT (engine_instance_id, resource_type, resource_id) WHERE state = 'Waiting'
    DO UPDATE SET next_attempt_at = least(operation.next_attempt_at, now());
  RETURN true;
END;
$$;
REVOKE EXECUTE ON FUNCTION gitops_agent_register(text, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION gitops_complete_application_release(uuid, uuid) FROM PUBLIC;

-- What an instance's role may do (run by the backend's role when it admits an instance). Column lists: an agent
-- changes only what running an operation, reporting a sync and ending an adoption write.
CREATE FUNCTION gitops_grant_engine_instance_role(p_role text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), p_role);
  EXECUTE format('GRANT SELECT ON engine_instance, cluster_user, application, application_state, sync_operation,'
    ' managed_environment, cluster_credentials, repository_credentials, api_cr_mapping, operation,'
    ' kysely_migration, kysely_migration_lock TO %I', p_role);
  EXECUTE format('GRANT UPDATE (releasing_engine_instance_id) ON application TO %I', p_role);
  EXECUTE format('GRANT INSERT, UPDATE, DELETE ON application_state TO %I', p_role);
  EXECUTE format('GRANT UPDATE (requested_at, requested_application_uid, argocd_phase, synced_revision, started_at,'
    ' finished_at, argocd_message, outcome, outcome_message, updated_at) ON sync_operation TO %I', p_role);
  EXECUTE format('GRANT UPDATE (state, message, attempts, next_attempt_at, last_attempt_at, finished_at)'
    ' ON operation TO %I', p_role);
  EXECUTE format('GRANT DELETE ON operation TO %I', p_role);
  EXECUTE format('GRANT EXECUTE ON FUNCTION gitops_agent_register(text, text, text),'
    ' gitops_complete_application_release(uuid, uuid) TO %I', p_role);
END;
$$;
REVOKE EXECUTE ON FUNCTION gitops_grant_engine_instance_role(text) FROM PUBLIC;

-- Notifications carry nothing another instance could use (any role may LISTEN on any channel it can name):
-- * gitops_operation_created (the relay): the operation id.
-- * gitops_engine_instance_<instance id without dashes> (that instance's agents): `<resource_type>/<resource id>`
--   of the new operation, which the agent then reads through its own role.
-- * gitops_operation_state_changed: the operation id (what 0.1.0 backends read back during an upgrade).
-- * the backend's own channel, named in backend_channel: the row as JSON, as 0007 sent it (the backend
--   re-enqueues the owner from it without a read; the id when it would not fit). Its name holds 122 random bits
--   that only the backend's role can read (the table has no grant to any other role), so only the backend can
--   LISTEN on it: a capability, like a password. The trigger function is a security definer to read it.
CREATE TABLE backend_channel (
  singleton boolean PRIMARY KEY DEFAULT true CONSTRAINT backend_channel_singleton_check CHECK (singleton),
  name text NOT NULL
);
INSERT INTO backend_channel (name) VALUES ('gitops_backend_' || replace(gen_random_uuid()::text, '-', ''));
ALTER TABLE backend_channel ENABLE ROW LEVEL SECURITY;

-- A security definer (to read backend_channel) that fires on every operation insert and state change: the table
-- named with its schema, no SET clause (as gitops_agent_instance above).
DO $$
BEGIN
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION gitops_notify_operation_row() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER AS $body$
    DECLARE
      payload text;
    BEGIN
      PERFORM pg_notify(TG_ARGV[0], NEW.id::text);
      IF TG_ARGV[0] = 'gitops_operation_created' THEN
        PERFORM pg_notify('gitops_engine_instance_' || replace(NEW.engine_instance_id::text, '-', ''),
          NEW.resource_type || '/' || NEW.resource_id::text);
      ELSE
        payload := row_to_json(NEW)::text;
        IF octet_length(payload) >= 8000 THEN
          payload := NEW.id::text;
        END IF;
        PERFORM pg_notify((SELECT name FROM %I.backend_channel), payload);
      END IF;
      RETURN NULL;
    END;
    $body$
  $f$, current_schema());
END;
$$;

-- The search path of the other security definer functions: this schema, then pg_temp (searched last).
DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION gitops_agent_register(text, text, text) SET search_path = %I, pg_temp', current_schema());
  EXECUTE format('ALTER FUNCTION gitops_complete_application_release(uuid, uuid) SET search_path = %I, pg_temp',
    current_schema());
END;
$$;
