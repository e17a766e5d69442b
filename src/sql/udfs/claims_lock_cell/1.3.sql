CREATE OR REPLACE FUNCTION @extschema@.claims_lock_cell(cell_id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_lock_cell'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION @extschema@.claims_lock_cell(bigint) IS
    'Wait for a cell''s lease creations in progress and hold off new ones until the transaction ends';
REVOKE ALL ON FUNCTION @extschema@.claims_lock_cell(bigint) FROM PUBLIC;
