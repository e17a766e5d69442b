CREATE OR REPLACE FUNCTION @extschema@.claims_commit(cell_id bigint, lease_uuid uuid)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_commit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.claims_commit(bigint, uuid) IS
    'CommitUpdate: make a lease''s changes permanent (repeatable)';
REVOKE ALL ON FUNCTION @extschema@.claims_commit(bigint, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_commit(bigint, uuid) TO claims_cell, claims_admin;
