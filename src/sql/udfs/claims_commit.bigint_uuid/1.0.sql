CREATE FUNCTION @extschema@.claims_commit(cell_id bigint, lease_uuid uuid)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_commit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
