CREATE FUNCTION @extschema@.claims_lock_cell(cell_id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_lock_cell'
LANGUAGE C VOLATILE STRICT;
