CREATE FUNCTION @extschema@.claims_list_leases(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_list_leases'
LANGUAGE C STABLE PARALLEL RESTRICTED;
