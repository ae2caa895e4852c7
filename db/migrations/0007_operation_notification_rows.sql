-- gitops_operation_created and gitops_operation_state_changed carry the operation row itself, as JSON
-- (row_to_json): the agent (created) and the backend (state changed) used to read the row back by id for every
-- notification, three reads per deployment. A row whose JSON would not fit a NOTIFY payload (under 8000 bytes;
-- only a long message of multi-byte characters gets near it) is announced by its id as before, and read.
-- Readers accept both forms (packages/db/src/operation.repository.ts, operationOfNotification).
CREATE FUNCTION gitops_operation_notification_payload(op operation) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
  payload text := row_to_json(op)::text;
BEGIN
  IF octet_length(payload) >= 8000 THEN
    RETURN op.id::text;
  END IF;
  RETURN payload;
END;
$$;

CREATE OR REPLACE FUNCTION gitops_notify_operation_created() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('gitops_operation_created', gitops_operation_notification_payload(NEW));
  RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION gitops_notify_operation_state_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('gitops_operation_state_changed', gitops_operation_notification_payload(NEW));
  RETURN NULL;
END;
$$;
