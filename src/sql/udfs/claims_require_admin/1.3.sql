CREATE OR REPLACE FUNCTION @extschema@.claims_require_admin()
RETURNS void
AS 'MODULE_PATHNAME', 'claims_require_admin'
LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.claims_require_admin() IS
    'Raise 42501 unless the calling role is an administrator (superuser or member of claims_admin)';
