CREATE FUNCTION @extschema@.claims_get_record(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_get_record'
LANGUAGE C STABLE PARALLEL RESTRICTED;
