-- Whether every one of these virtual transactions has ended (never waits).
CREATE FUNCTION @extschema@.transactions_ended(vxids text[])
RETURNS boolean
AS 'MODULE_PATHNAME', 'claims_cell_transactions_ended'
LANGUAGE C STRICT VOLATILE;
