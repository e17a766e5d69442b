-- ---------------------------------------------------------------------------
-- TRUNCATE of a claimed table releases its values, as DELETE would.
-- ---------------------------------------------------------------------------
CREATE FUNCTION @extschema@.collect_truncate()
RETURNS trigger
AS 'MODULE_PATHNAME', 'claims_cell_collect_truncate'
LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.collect_truncate() FROM PUBLIC;
