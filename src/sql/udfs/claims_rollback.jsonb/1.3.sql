CREATE OR REPLACE FUNCTION @extschema@.claims_rollback(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_rollback_request'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.claims_rollback(jsonb) IS
    'RollbackUpdate with a RollbackUpdateRequest as proto3 JSON; returns {}';
REVOKE ALL ON FUNCTION @extschema@.claims_rollback(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_rollback(jsonb) TO claims_cell, claims_admin;
