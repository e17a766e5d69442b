/* claims--1.1--1.2.sql: what the claims.v1 gRPC front needs from the store. */

\echo Use "ALTER EXTENSION claims UPDATE TO '1.2'" to load this file. \quit

-- ---------------------------------------------------------------------------
-- claims.v1 over gRPC: CommitUpdate and RollbackUpdate as proto3 JSON.
-- ---------------------------------------------------------------------------

-- CommitUpdateRequest / RollbackUpdateRequest as jsonb: the same lease
-- finishing, checks and errors as the (bigint, uuid) forms; the answer is
-- the empty response message, {}.
CREATE FUNCTION @extschema@.claims_commit(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_commit_request'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.claims_rollback(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_rollback_request'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.claims_commit(jsonb) IS
    'CommitUpdate with a CommitUpdateRequest as proto3 JSON; returns {}';
COMMENT ON FUNCTION @extschema@.claims_rollback(jsonb) IS
    'RollbackUpdate with a RollbackUpdateRequest as proto3 JSON; returns {}';

REVOKE ALL ON FUNCTION @extschema@.claims_commit(jsonb), @extschema@.claims_rollback(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_commit(jsonb), @extschema@.claims_rollback(jsonb)
    TO claims_cell, claims_admin;
