-- verify() refuses a table the calling transaction changed: its rows are
-- claimed at COMMIT, so the store does not hold them yet, and a repair
-- would claim them twice
CREATE FUNCTION @extschema@.changed_in_transaction("table" regclass)
RETURNS boolean
AS 'MODULE_PATHNAME', 'claims_cell_changed_in_transaction'
LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.changed_in_transaction(regclass) FROM PUBLIC;
