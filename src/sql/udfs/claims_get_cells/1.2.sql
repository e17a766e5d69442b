-- GetCells: every registered cell as CellInfo.
CREATE FUNCTION @extschema@.claims_get_cells(request jsonb DEFAULT '{}')
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_get_cells'
LANGUAGE C STABLE PARALLEL RESTRICTED;
