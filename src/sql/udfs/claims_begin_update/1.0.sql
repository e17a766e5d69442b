-- The API. Each function judges the role that called it, then runs its
-- statements as the extension's owner with the search path pinned to
-- pg_catalog alone (in C, for the length of the call: cheaper than a SET
-- clause, which saves and restores the setting on every call); every
-- statement inside is schema-qualified and takes values only as parameters.
CREATE FUNCTION @extschema@.claims_begin_update(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_begin_update'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
