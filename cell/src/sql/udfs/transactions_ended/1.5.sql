-- Whether every one of these virtual transactions has ended (never waits).
CREATE OR REPLACE FUNCTION @extschema@.transactions_ended(vxids text[])
RETURNS boolean
AS 'MODULE_PATHNAME', 'claims_cell_transactions_ended'
LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.transactions_ended(text[]) FROM PUBLIC;
