CREATE FUNCTION @extschema@.claims_list_records(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_list_records'
LANGUAGE C STABLE PARALLEL RESTRICTED;
