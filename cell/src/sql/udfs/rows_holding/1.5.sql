-- The rows of a claimed column holding a value, locked FOR SHARE NOWAIT
-- until the transaction ends, read as the table's owner (its code never
-- runs with the caller's privileges). From 1.5 the source key has every
-- column of the primary key, and a partitioned table's rows are read
-- through it.
CREATE FUNCTION @extschema@.rows_holding("table" regclass, attnum smallint, value text,
                                         subject_attnum smallint, source_attnums smallint[])
RETURNS TABLE (source_id bytea, subject bigint)
AS 'MODULE_PATHNAME', 'claims_cell_rows_holding_key'
LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.rows_holding(regclass, smallint, text, smallint, smallint[]) FROM PUBLIC;
