CREATE FUNCTION @extschema@.claims_require_admin()
RETURNS void
AS 'MODULE_PATHNAME', 'claims_require_admin'
LANGUAGE C STABLE;
