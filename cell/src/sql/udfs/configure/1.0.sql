CREATE FUNCTION @extschema@.configure(server_name name, cell_id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_configure'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.configure(name, bigint) IS
    'Name the claims store server (FOREIGN DATA WRAPPER claims_cell_store) and this cell''s id';
