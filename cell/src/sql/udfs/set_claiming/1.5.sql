CREATE OR REPLACE FUNCTION @extschema@.set_claiming("table" regclass, "column" name, enabled boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_set_claiming'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.set_claiming(regclass, name, boolean) IS
    'Pause or resume claiming of a claimed column';
REVOKE ALL ON FUNCTION @extschema@.set_claiming(regclass, name, boolean) FROM PUBLIC;
