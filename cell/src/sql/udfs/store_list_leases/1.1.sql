-- One page of claims_list_leases at the store (raises 08006 when unreachable).
CREATE FUNCTION @extschema@.store_list_leases(server name, request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_cell_store_list_leases'
LANGUAGE C STRICT VOLATILE;
