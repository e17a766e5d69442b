-- CommitUpdateRequest / RollbackUpdateRequest as jsonb: the same lease
-- finishing, checks and errors as the (bigint, uuid) forms; the answer is
-- the empty response message, {}.
CREATE OR REPLACE FUNCTION @extschema@.claims_commit(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_commit_request'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.claims_commit(jsonb) IS
    'CommitUpdate with a CommitUpdateRequest as proto3 JSON; returns {}';
REVOKE ALL ON FUNCTION @extschema@.claims_commit(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_commit(jsonb) TO claims_cell, claims_admin;
