-- 0001_initial: the whole first schema (design: data-model.md).
--
-- Applied by packages/db/src/migrator.ts (Kysely Migrator, advisory lock, one transaction for all pending
-- migrations). Once released this file is frozen: change the schema with a new numbered file.
--
-- Conventions used below:
-- * uuid primary keys (gen_random_uuid()), timestamptz, jsonb.
-- * Every foreign key states its ON DELETE behaviour.
-- * Enum-like text columns have a CHECK constraint; the same lists live in packages/db/src/schema-values.ts
--   (a test compares them).
-- * Columns ending in `_sealed` hold AES-256-GCM sealed bytes (packages/db/src/sealing.ts), never plaintext.
-- * updated_at is maintained by a trigger, so writers cannot forget it.
-- * Notifications are sent by triggers (see the end of this file), so they fire exactly when the row really
--   changed and only when the transaction commits. Payloads are row ids; listeners re-read the row.

CREATE FUNCTION gitops_set_updated_at() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.updated_at := now();
  RETURN NEW;
END;
$$;

-- One tenant = one user namespace.
CREATE TABLE cluster_user (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  namespace_uid text NOT NULL,
  namespace_name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT cluster_user_namespace_uid_key UNIQUE (namespace_uid)
);

-- One Argo CD namespace served by one cluster-agent. `name` is the stable identity from configuration, so
-- a re-created namespace (new uid) updates this row instead of orphaning everything that points at it.
CREATE TABLE engine_instance (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL,
  namespace_name text NOT NULL,
  namespace_uid text NOT NULL,
  cluster_identity text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT engine_instance_name_key UNIQUE (name)
);

-- Credentials for one external cluster. Owned by a tenant; referenced by managed_environment.
CREATE TABLE cluster_credentials (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  cluster_user_id uuid NOT NULL REFERENCES cluster_user (id) ON DELETE CASCADE,
  api_url text NOT NULL,
  bearer_token_sealed bytea NOT NULL,
  allow_insecure_skip_tls_verify boolean NOT NULL DEFAULT false,
  namespaces text[] NOT NULL DEFAULT '{}',
  cluster_resources boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX cluster_credentials_cluster_user_id_idx ON cluster_credentials (cluster_user_id);

-- A deploy target: the tenant's own namespace (kind Workspace, in-cluster, no credentials) or one
-- GitOpsDeploymentManagedEnvironment CR (kind External, with credentials).
-- cluster_credentials_id is NO ACTION: credentials cannot be deleted while an environment uses them, but
-- a cascade from cluster_user that removes both in one statement is fine (checked at statement end).
CREATE TABLE managed_environment (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  cluster_user_id uuid NOT NULL REFERENCES cluster_user (id) ON DELETE CASCADE,
  kind text NOT NULL,
  name text NOT NULL,
  cluster_credentials_id uuid REFERENCES cluster_credentials (id) ON DELETE NO ACTION,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT managed_environment_kind_check CHECK (kind IN ('Workspace', 'External')),
  CONSTRAINT managed_environment_credentials_check
    CHECK ((kind = 'Workspace') = (cluster_credentials_id IS NULL))
);
CREATE INDEX managed_environment_cluster_user_id_idx ON managed_environment (cluster_user_id);
CREATE INDEX managed_environment_cluster_credentials_id_idx ON managed_environment (cluster_credentials_id);
-- At most one workspace target per tenant.
CREATE UNIQUE INDEX managed_environment_workspace_key ON managed_environment (cluster_user_id)
  WHERE kind = 'Workspace';

-- One Argo CD Application per GitOpsDeployment. `spec` is the desired Argo CD Application spec.
-- managed_environment_id is SET NULL: when the environment goes, the Application keeps existing and the
-- agent renders an empty destination name (Argo CD reports the error) until the user fixes the reference.
-- engine_instance_id is RESTRICT: an instance cannot be removed while Applications are placed on it.
CREATE TABLE application (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL,
  cluster_user_id uuid NOT NULL REFERENCES cluster_user (id) ON DELETE CASCADE,
  engine_instance_id uuid NOT NULL REFERENCES engine_instance (id) ON DELETE RESTRICT,
  managed_environment_id uuid REFERENCES managed_environment (id) ON DELETE SET NULL,
  spec jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT application_name_key UNIQUE (name),
  CONSTRAINT application_spec_is_object CHECK (jsonb_typeof(spec) = 'object')
);
CREATE INDEX application_cluster_user_id_idx ON application (cluster_user_id);
CREATE INDEX application_engine_instance_id_idx ON application (engine_instance_id);
CREATE INDEX application_managed_environment_id_idx ON application (managed_environment_id);

-- Compact projection of the Argo CD Application status, written by the agent only when it changed.
CREATE TABLE application_state (
  application_id uuid PRIMARY KEY REFERENCES application (id) ON DELETE CASCADE,
  state jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT application_state_state_is_object CHECK (jsonb_typeof(state) = 'object')
);

-- One row per GitOpsDeploymentSyncRun. application_id is SET NULL: the SyncRun may outlive (or precede)
-- its GitOpsDeployment; deployment_name keeps the reference the user wrote.
CREATE TABLE sync_operation (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  cluster_user_id uuid NOT NULL REFERENCES cluster_user (id) ON DELETE CASCADE,
  application_id uuid REFERENCES application (id) ON DELETE SET NULL,
  deployment_name text NOT NULL,
  revision text NOT NULL DEFAULT '',
  desired_state text NOT NULL DEFAULT 'Running',
  outcome text,
  outcome_message text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT sync_operation_desired_state_check CHECK (desired_state IN ('Running', 'Terminated')),
  CONSTRAINT sync_operation_outcome_check
    CHECK (outcome IS NULL OR outcome IN ('Succeeded', 'Failed', 'Error', 'Terminated'))
);
CREATE INDEX sync_operation_cluster_user_id_idx ON sync_operation (cluster_user_id);
CREATE INDEX sync_operation_application_id_idx ON sync_operation (application_id, created_at);

-- One row per GitOpsDeploymentRepositoryCredential. Becomes a project-scoped Argo CD repository Secret.
CREATE TABLE repository_credentials (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  cluster_user_id uuid NOT NULL REFERENCES cluster_user (id) ON DELETE CASCADE,
  engine_instance_id uuid NOT NULL REFERENCES engine_instance (id) ON DELETE RESTRICT,
  repository_url text NOT NULL,
  normalized_repository_url text NOT NULL,
  secret_name text NOT NULL,
  username_sealed bytea,
  password_sealed bytea,
  ssh_private_key_sealed bytea,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX repository_credentials_cluster_user_id_idx
  ON repository_credentials (cluster_user_id, normalized_repository_url);
CREATE INDEX repository_credentials_engine_instance_id_idx ON repository_credentials (engine_instance_id);

-- User CR <-> database row. Exactly one of the row columns is set, matching cr_kind; each is CASCADE so
-- deleting the row removes its mapping (no orphans). Found by CR uid (delete events, delete-recreate)
-- or by namespace/kind/name.
CREATE TABLE api_cr_mapping (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  cr_kind text NOT NULL,
  cr_uid text NOT NULL,
  cr_name text NOT NULL,
  cr_namespace text NOT NULL,
  cr_namespace_uid text NOT NULL,
  application_id uuid REFERENCES application (id) ON DELETE CASCADE,
  sync_operation_id uuid REFERENCES sync_operation (id) ON DELETE CASCADE,
  managed_environment_id uuid REFERENCES managed_environment (id) ON DELETE CASCADE,
  repository_credentials_id uuid REFERENCES repository_credentials (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT api_cr_mapping_cr_uid_key UNIQUE (cr_uid),
  CONSTRAINT api_cr_mapping_cr_kind_check CHECK (cr_kind IN (
    'GitOpsDeployment',
    'GitOpsDeploymentSyncRun',
    'GitOpsDeploymentManagedEnvironment',
    'GitOpsDeploymentRepositoryCredential'
  )),
  CONSTRAINT api_cr_mapping_one_row_check CHECK (
    num_nonnulls(application_id, sync_operation_id, managed_environment_id, repository_credentials_id) = 1
  ),
  CONSTRAINT api_cr_mapping_row_matches_kind_check CHECK (CASE cr_kind
    WHEN 'GitOpsDeployment' THEN application_id IS NOT NULL
    WHEN 'GitOpsDeploymentSyncRun' THEN sync_operation_id IS NOT NULL
    WHEN 'GitOpsDeploymentManagedEnvironment' THEN managed_environment_id IS NOT NULL
    WHEN 'GitOpsDeploymentRepositoryCredential' THEN repository_credentials_id IS NOT NULL
  END)
);
CREATE INDEX api_cr_mapping_cr_name_idx ON api_cr_mapping (cr_namespace, cr_kind, cr_name);
CREATE UNIQUE INDEX api_cr_mapping_application_id_key ON api_cr_mapping (application_id)
  WHERE application_id IS NOT NULL;
CREATE UNIQUE INDEX api_cr_mapping_sync_operation_id_key ON api_cr_mapping (sync_operation_id)
  WHERE sync_operation_id IS NOT NULL;
CREATE UNIQUE INDEX api_cr_mapping_managed_environment_id_key ON api_cr_mapping (managed_environment_id)
  WHERE managed_environment_id IS NOT NULL;
CREATE UNIQUE INDEX api_cr_mapping_repository_credentials_id_key ON api_cr_mapping (repository_credentials_id)
  WHERE repository_credentials_id IS NOT NULL;

-- The transactional outbox. resource_id has no foreign key on purpose: a delete is announced by an
-- operation whose row no longer exists.
-- * engine_instance_id CASCADE: operations are only notifications for that instance's agent.
-- * owner_user_id SET NULL: a reconcile may delete the tenant together with its last rows; the operations
--   announcing those deletes must survive it.
-- * owner_kind/namespace/name/uid: the user CR to re-enqueue when the operation finishes (all or none).
-- * delivery_*: the relay's bookkeeping (Operation CR creation); attempts/next_attempt_at/last_attempt_at:
--   the agent's.
CREATE TABLE operation (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  engine_instance_id uuid NOT NULL REFERENCES engine_instance (id) ON DELETE CASCADE,
  resource_type text NOT NULL,
  resource_id uuid NOT NULL,
  owner_user_id uuid REFERENCES cluster_user (id) ON DELETE SET NULL,
  owner_kind text,
  owner_namespace text,
  owner_name text,
  owner_uid text,
  state text NOT NULL DEFAULT 'Waiting',
  message text NOT NULL DEFAULT '',
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_attempt_at timestamptz,
  delivery_attempts integer NOT NULL DEFAULT 0,
  next_delivery_at timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz,
  finished_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT operation_resource_type_check CHECK (resource_type IN (
    'Application', 'ManagedEnvironment', 'RepositoryCredentials', 'SyncOperation', 'AppProject'
  )),
  CONSTRAINT operation_state_check CHECK (state IN ('Waiting', 'In_Progress', 'Completed', 'Failed')),
  CONSTRAINT operation_owner_kind_check CHECK (owner_kind IS NULL OR owner_kind IN (
    'GitOpsDeployment',
    'GitOpsDeploymentSyncRun',
    'GitOpsDeploymentManagedEnvironment',
    'GitOpsDeploymentRepositoryCredential'
  )),
  CONSTRAINT operation_owner_complete_check
    CHECK (num_nulls(owner_kind, owner_namespace, owner_name, owner_uid) IN (0, 4)),
  CONSTRAINT operation_message_length_check CHECK (char_length(message) <= 2000),
  CONSTRAINT operation_attempts_check CHECK (attempts >= 0 AND delivery_attempts >= 0),
  CONSTRAINT operation_finished_at_check
    CHECK ((state IN ('Completed', 'Failed')) = (finished_at IS NOT NULL))
);
-- "At most one Waiting operation per (instance, type, resource)": writers reuse it (INSERT ... ON CONFLICT).
CREATE UNIQUE INDEX operation_waiting_resource_key ON operation (engine_instance_id, resource_type, resource_id)
  WHERE state = 'Waiting';
-- The relay's claim query (undelivered, not finished; oldest first).
CREATE INDEX operation_undelivered_idx ON operation (created_at)
  WHERE delivered_at IS NULL AND state IN ('Waiting', 'In_Progress');
-- The agent's safety-net sweep of due Waiting rows of its instance.
CREATE INDEX operation_waiting_due_idx ON operation (engine_instance_id, next_attempt_at)
  WHERE state = 'Waiting';
-- Stale In_Progress rows of an instance (agent crashed mid-operation).
CREATE INDEX operation_in_progress_idx ON operation (engine_instance_id, last_attempt_at)
  WHERE state = 'In_Progress';
-- Retention: finished rows are deleted after a configurable period.
CREATE INDEX operation_finished_at_idx ON operation (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX operation_owner_user_id_idx ON operation (owner_user_id);
CREATE INDEX operation_resource_idx ON operation (resource_type, resource_id);

CREATE TRIGGER cluster_user_set_updated_at BEFORE UPDATE ON cluster_user
  FOR EACH ROW EXECUTE FUNCTION gitops_set_updated_at();
CREATE TRIGGER engine_instance_set_updated_at BEFORE UPDATE ON engine_instance
  FOR EACH ROW EXECUTE FUNCTION gitops_set_updated_at();
CREATE TRIGGER cluster_credentials_set_updated_at BEFORE UPDATE ON cluster_credentials
  FOR EACH ROW EXECUTE FUNCTION gitops_set_updated_at();
CREATE TRIGGER managed_environment_set_updated_at BEFORE UPDATE ON managed_environment
  FOR EACH ROW EXECUTE FUNCTION gitops_set_updated_at();
CREATE TRIGGER application_set_updated_at BEFORE UPDATE ON application
  FOR EACH ROW EXECUTE FUNCTION gitops_set_updated_at();
CREATE TRIGGER application_state_set_updated_at BEFORE UPDATE ON application_state
  FOR EACH ROW EXECUTE FUNCTION gitops_set_updated_at();
CREATE TRIGGER sync_operation_set_updated_at BEFORE UPDATE ON sync_operation
  FOR EACH ROW EXECUTE FUNCTION gitops_set_updated_at();
CREATE TRIGGER repository_credentials_set_updated_at BEFORE UPDATE ON repository_credentials
  FOR EACH ROW EXECUTE FUNCTION gitops_set_updated_at();
CREATE TRIGGER operation_set_updated_at BEFORE UPDATE ON operation
  FOR EACH ROW EXECUTE FUNCTION gitops_set_updated_at();

-- Notifications (channel names: packages/db/src/notify.ts). NOTIFY is transactional: delivered on commit,
-- dropped on rollback; identical payloads within one transaction are delivered once.
--   gitops_operation_created        payload operation id    wakes the relay
--   gitops_operation_state_changed  payload operation id    backend re-enqueues the owning user CR
--   gitops_application_state_changed payload application id backend patches GitOpsDeployment status
CREATE FUNCTION gitops_notify_operation_created() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('gitops_operation_created', NEW.id::text);
  RETURN NULL;
END;
$$;
CREATE TRIGGER operation_notify_created AFTER INSERT ON operation
  FOR EACH ROW EXECUTE FUNCTION gitops_notify_operation_created();

CREATE FUNCTION gitops_notify_operation_state_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('gitops_operation_state_changed', NEW.id::text);
  RETURN NULL;
END;
$$;
CREATE TRIGGER operation_notify_state_changed AFTER UPDATE OF state ON operation
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
  EXECUTE FUNCTION gitops_notify_operation_state_changed();

CREATE FUNCTION gitops_notify_application_state_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('gitops_application_state_changed', NEW.application_id::text);
  RETURN NULL;
END;
$$;
CREATE TRIGGER application_state_notify_inserted AFTER INSERT ON application_state
  FOR EACH ROW EXECUTE FUNCTION gitops_notify_application_state_changed();
CREATE TRIGGER application_state_notify_updated AFTER UPDATE OF state ON application_state
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
  EXECUTE FUNCTION gitops_notify_application_state_changed();
