-- gitops_operation_created and gitops_operation_state_changed carry the operation row itself, as JSON
-- (row_to_json): the agent (created) and the backend (state changed) used to read the row back by id for every
-- notification, three reads per deployment. A row whose JSON would not fit a NOTIFY payload (under 8000 bytes;
-- only a long message of multi-byte characters gets near it) is announced by its id as before, and read.
-- Readers accept both forms (packages/db/src/operation.repository.ts, operationOfNotification).
-- One trigger function for both channels: the channel is the trigger's argument.
CREATE FUNCTION gitops_notify_operation_row() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  payload text := row_to_json(NEW)::text;
BEGIN
  IF octet_length(payload) >= 8000 THEN
    payload := NEW.id::text;
  END IF;
  PERFORM pg_notify(TG_ARGV[0], payload);
  RETURN NULL;
END;
$$;

DROP TRIGGER operation_notify_created ON operation;
CREATE TRIGGER operation_notify_created AFTER INSERT ON operation
  FOR EACH ROW EXECUTE FUNCTION gitops_notify_operation_row('gitops_operation_created');

DROP TRIGGER operation_notify_state_changed ON operation;
CREATE TRIGGER operation_notify_state_changed AFTER UPDATE OF state ON operation
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
  EXECUTE FUNCTION gitops_notify_operation_row('gitops_operation_state_changed');

DROP FUNCTION gitops_notify_operation_created();
DROP FUNCTION gitops_notify_operation_state_changed();
