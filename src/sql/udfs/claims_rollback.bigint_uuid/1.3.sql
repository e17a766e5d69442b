CREATE OR REPLACE FUNCTION @extschema@.claims_rollback(cell_id bigint, lease_uuid uuid)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_rollback'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.claims_rollback(bigint, uuid) IS
    'RollbackUpdate: undo a lease''s changes (repeatable)';
REVOKE ALL ON FUNCTION @extschema@.claims_rollback(bigint, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_rollback(bigint, uuid) TO claims_cell, claims_admin;
