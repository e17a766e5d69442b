CREATE OR REPLACE FUNCTION @extschema@.unclaim_column("table" regclass, "column" name)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_unclaim_column'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.unclaim_column(regclass, name) IS
    'Stop claiming a column and remove its triggers';
REVOKE ALL ON FUNCTION @extschema@.unclaim_column(regclass, name) FROM PUBLIC;
