CREATE OR REPLACE FUNCTION @extschema@.claims_list_records(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_list_records'
LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.claims_list_records(jsonb) IS
    'ListRecords: a cell''s claims of one source type in source id order';
REVOKE ALL ON FUNCTION @extschema@.claims_list_records(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_list_records(jsonb) TO claims_cell, claims_admin;
