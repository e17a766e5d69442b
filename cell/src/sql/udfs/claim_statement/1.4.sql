-- Statement trigger of claimed tables: claims the statement's immediate changes.
CREATE FUNCTION @extschema@.claim_statement()
RETURNS trigger
AS 'MODULE_PATHNAME', 'claims_cell_claim_statement'
LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.claim_statement() FROM PUBLIC;
