-- GetCells: every registered cell as CellInfo.
CREATE OR REPLACE FUNCTION @extschema@.claims_get_cells(request jsonb DEFAULT '{}')
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_get_cells'
LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.claims_get_cells(jsonb) IS
    'GetCells: every registered cell as CellInfo (cells and administrators)';
REVOKE ALL ON FUNCTION @extschema@.claims_get_cells(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_get_cells(jsonb) TO claims_cell, claims_admin;
