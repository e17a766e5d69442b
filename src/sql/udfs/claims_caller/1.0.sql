CREATE FUNCTION @extschema@.claims_caller()
RETURNS text
AS 'MODULE_PATHNAME', 'claims_caller'
LANGUAGE C STABLE;
