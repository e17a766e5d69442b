-- A foreign-data wrapper that only holds libpq options (like dblink_fdw):
-- the server names the store, the user mapping holds the cell's credentials.
CREATE OR REPLACE FUNCTION @extschema@.store_validator(options text[], catalog oid)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_store_validator'
LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION @extschema@.store_validator(text[], oid) FROM PUBLIC;
