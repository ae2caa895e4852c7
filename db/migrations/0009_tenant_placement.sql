-- Placement of tenants on engine instances (docs/architecture.md, "Placement"). Every tenant lives on exactly
-- one instance, chosen once when it first needs one and never changed by itself: cluster_user.engine_instance_id
-- (NULL until then). RESTRICT: an instance cannot be removed while tenants are placed on it.
-- engine_instance.cordoned: the instance takes no new tenants (those placed on it stay), like a cordoned node.
ALTER TABLE engine_instance ADD COLUMN cordoned boolean NOT NULL DEFAULT false;
ALTER TABLE cluster_user ADD COLUMN engine_instance_id uuid REFERENCES engine_instance (id) ON DELETE RESTRICT;
CREATE INDEX cluster_user_engine_instance_id_idx ON cluster_user (engine_instance_id);

-- Tenants that already have Argo CD objects stay where those are (before this migration a backend served one
-- instance, so a tenant's rows share it).
UPDATE cluster_user u SET engine_instance_id = placed.engine_instance_id
FROM (
  SELECT DISTINCT ON (cluster_user_id) cluster_user_id, engine_instance_id
  FROM (
    SELECT cluster_user_id, engine_instance_id FROM application
    UNION ALL
    SELECT cluster_user_id, engine_instance_id FROM repository_credentials
  ) owned
  GROUP BY cluster_user_id, engine_instance_id
  ORDER BY cluster_user_id, count(*) DESC, engine_instance_id
) placed
WHERE placed.cluster_user_id = u.id;
