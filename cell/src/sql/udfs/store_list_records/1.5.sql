CREATE OR REPLACE FUNCTION @extschema@.store_list_records(server name, request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_cell_store_list_records'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION @extschema@.store_list_records(name, jsonb) IS
    'One page of claims_list_records at the claims store';
REVOKE ALL ON FUNCTION @extschema@.store_list_records(name, jsonb) FROM PUBLIC;
