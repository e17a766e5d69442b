CREATE OR REPLACE FUNCTION @extschema@.claims_caller()
RETURNS text
AS 'MODULE_PATHNAME', 'claims_caller'
LANGUAGE C STABLE;
COMMENT ON FUNCTION @extschema@.claims_caller() IS
    'The acting role, as the audit log records it';
