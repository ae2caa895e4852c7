-- An operation's start (Waiting -> In_Progress, the agent's claim) is no longer announced. No backend reads
-- anything from it: every owner's reconcile treats Waiting and In_Progress alike (pending), and a
-- GitOpsDeployment is re-enqueued only when its operation finished. Each announcement cost a trigger run, two
-- NOTIFYs, a wakeup of every listening session at commit and a notification the backend parsed and dropped:
-- one per operation. Every other change of state is announced as before (a retry back to Waiting with its
-- message, Completed, Failed).
--
-- Compatibility: backends of the previous version and 0.1.0 ones read the same outcome without it.
DROP TRIGGER operation_notify_state_changed ON operation;
CREATE TRIGGER operation_notify_state_changed AFTER UPDATE OF state ON operation
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.state <> 'In_Progress')
  EXECUTE FUNCTION gitops_notify_operation_row('gitops_operation_state_changed');
