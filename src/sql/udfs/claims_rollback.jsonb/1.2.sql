CREATE FUNCTION @extschema@.claims_rollback(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_rollback_request'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
