CREATE OR REPLACE FUNCTION @extschema@.claims_list_leases(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_list_leases'
LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.claims_list_leases(jsonb) IS
    'ListLeases: a cell''s outstanding leases, keyset-paged';
REVOKE ALL ON FUNCTION @extschema@.claims_list_leases(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_list_leases(jsonb) TO claims_cell, claims_admin;
