-- CommitUpdateRequest / RollbackUpdateRequest as jsonb: the same lease
-- finishing, checks and errors as the (bigint, uuid) forms; the answer is
-- the empty response message, {}.
CREATE FUNCTION @extschema@.claims_commit(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_commit_request'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
