-- SET CONSTRAINTS for claimed columns, for the rest of the transaction:
-- mode 'IMMEDIATE' or 'DEFERRED'; no table: every deferrable claimed
-- column; a table without a column: its deferrable claimed columns.
CREATE FUNCTION @extschema@.set_constraints(mode text, "table" regclass DEFAULT NULL,
                                            "column" name DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_set_constraints'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.set_constraints(text, regclass, name) IS
    'SET CONSTRAINTS for claimed columns: claim them at the end of each statement (IMMEDIATE) or at COMMIT (DEFERRED)';
GRANT EXECUTE ON FUNCTION @extschema@.set_constraints(text, regclass, name) TO PUBLIC;
