-- Statement trigger of claimed tables: TRUNCATE would bypass the claims.
CREATE FUNCTION @extschema@.refuse_truncate()
RETURNS trigger
AS 'MODULE_PATHNAME', 'claims_cell_refuse_truncate'
LANGUAGE C;
