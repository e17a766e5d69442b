-- The API. Each function judges the role that called it, then runs its
-- statements as the extension's owner with the search path pinned to
-- pg_catalog alone (in C, for the length of the call: cheaper than a SET
-- clause, which saves and restores the setting on every call); every
-- statement inside is schema-qualified and takes values only as parameters.
CREATE OR REPLACE FUNCTION @extschema@.claims_begin_update(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_begin_update'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.claims_begin_update(jsonb) IS
    'BeginUpdate: lease creates and destroys of one batch, all or nothing';
REVOKE ALL ON FUNCTION @extschema@.claims_begin_update(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_begin_update(jsonb) TO claims_cell, claims_admin;
