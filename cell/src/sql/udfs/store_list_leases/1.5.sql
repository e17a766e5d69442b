-- One page of claims_list_leases at the store (raises 08006 when unreachable).
CREATE OR REPLACE FUNCTION @extschema@.store_list_leases(server name, request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_cell_store_list_leases'
LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.store_list_leases(name, jsonb) FROM PUBLIC;
