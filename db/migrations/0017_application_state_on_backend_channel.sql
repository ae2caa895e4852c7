-- An application_state change reaches the backend with the row (issue 34): until now its NOTIFY carried the
-- application id only, and the backend's status path read the row back, joined with the name of the engine
-- instance, once per change (2.8 statements per change at 1,000 deployments, the largest the backend ran).
--
-- The backend gets a second channel of its own, named in the new column backend_channel.state_name: like the
-- operation channel of 0012 its name holds 122 random bits that only the backend's role can read (the table
-- has row-level security and no grant to any other role), so only the backend can LISTEN on it. The payload is
--   {"application_id": <uuid>, "state": <the projection>, "engine_instance_name": <text>}
-- or, when that would not fit a payload (8000 bytes), {"application_id": <uuid>} alone: the backend then reads
-- the row as before. moveTenant sends the short form too (the instance changed, not the state).
--
-- Compatibility: gitops_application_state_changed still carries the application id, for a backend of the
-- previous version during a rolling upgrade (it LISTENs there and reads the row back). A backend of this
-- version LISTENs on its own channel only.
ALTER TABLE backend_channel ADD COLUMN state_name text NOT NULL
  DEFAULT ('gitops_backend_state_' || replace(gen_random_uuid()::text, '-', ''));

-- A security definer, to read backend_channel (and the engine instance's name past row-level security), as
-- gitops_notify_operation_row of 0012: the tables named with their schema, no SET clause.
DO $$
BEGIN
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION gitops_notify_application_state_changed() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER AS $body$
    DECLARE
      payload text;
    BEGIN
      PERFORM pg_notify('gitops_application_state_changed', NEW.application_id::text);
      payload := json_build_object(
        'application_id', NEW.application_id,
        'state', NEW.state,
        'engine_instance_name', (SELECT e.name FROM %1$I.application a
          JOIN %1$I.engine_instance e ON e.id = a.engine_instance_id WHERE a.id = NEW.application_id))::text;
      IF octet_length(payload) >= 8000 THEN
        payload := json_build_object('application_id', NEW.application_id)::text;
      END IF;
      PERFORM pg_notify((SELECT state_name FROM %1$I.backend_channel), payload);
      RETURN NULL;
    END;
    $body$
  $f$, current_schema());
END;
$$;
