CREATE OR REPLACE FUNCTION @extschema@.configure(server_name name, cell_id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_configure'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.configure(name, bigint) IS
    'Name the claims store server (FOREIGN DATA WRAPPER claims_cell_store) and this cell''s id';
REVOKE ALL ON FUNCTION @extschema@.configure(name, bigint) FROM PUBLIC;
