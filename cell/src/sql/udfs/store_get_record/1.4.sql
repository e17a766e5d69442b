-- One record at the store, for claim_again().
CREATE FUNCTION @extschema@.store_get_record(server name, request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_cell_store_get_record'
LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.store_get_record(name, jsonb) FROM PUBLIC;
