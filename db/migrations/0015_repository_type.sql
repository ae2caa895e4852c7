-- The kind of repository a repository credential is for (issue 35): `git` (every row before this migration),
-- `helm` (a Helm repository, http(s)://) or `oci` (an OCI registry, oci://), as Argo CD's repository Secrets
-- have it in their `type` key. The agent writes it into the repository Secret; the backend checks the
-- credentials the way that kind of repository answers (git ls-remote, a Helm index, an OCI registry's /v2/).
-- Compatibility: code of the previous version never writes the column (the default keeps its rows git) and
-- never reads it; a row of type helm or oci read by such an agent becomes a git repository Secret, which Argo
-- CD does not use for a chart (Argo CD reports the chart's source as not found, nothing else breaks).
ALTER TABLE repository_credentials
  ADD COLUMN repository_type text NOT NULL DEFAULT 'git'
  CONSTRAINT repository_credentials_repository_type_check CHECK (repository_type IN ('git', 'helm', 'oci'));
