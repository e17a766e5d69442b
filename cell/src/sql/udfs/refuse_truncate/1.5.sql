-- Statement trigger of claimed tables: TRUNCATE would bypass the claims.
CREATE OR REPLACE FUNCTION @extschema@.refuse_truncate()
RETURNS trigger
AS 'MODULE_PATHNAME', 'claims_cell_refuse_truncate'
LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.refuse_truncate() FROM PUBLIC;
