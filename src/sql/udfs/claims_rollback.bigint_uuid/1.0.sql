CREATE FUNCTION @extschema@.claims_rollback(cell_id bigint, lease_uuid uuid)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_rollback'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
