-- Row trigger of claimed columns: remembers each change for the commit.
CREATE FUNCTION @extschema@.collect()
RETURNS trigger
AS 'MODULE_PATHNAME', 'claims_cell_collect'
LANGUAGE C;
