CREATE FUNCTION @extschema@.set_claiming("table" regclass, "column" name, enabled boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_set_claiming'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.set_claiming(regclass, name, boolean) IS
    'Pause or resume claiming of a claimed column';
