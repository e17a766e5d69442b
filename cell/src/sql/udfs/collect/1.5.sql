-- Row trigger of claimed columns: remembers each change for the commit.
CREATE OR REPLACE FUNCTION @extschema@.collect()
RETURNS trigger
AS 'MODULE_PATHNAME', 'claims_cell_collect'
LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.collect() FROM PUBLIC;
