CREATE OR REPLACE FUNCTION @extschema@.claims_get_record(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_get_record'
LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.claims_get_record(jsonb) IS
    'GetRecord: the record of one value, or NULL when unclaimed';
REVOKE ALL ON FUNCTION @extschema@.claims_get_record(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_get_record(jsonb) TO claims_cell, claims_admin, claims_router;
