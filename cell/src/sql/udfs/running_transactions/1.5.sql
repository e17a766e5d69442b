-- The virtual transaction ids of the transactions running in this database
-- but the caller's (every session, whatever pg_stat_activity shows of it).
CREATE OR REPLACE FUNCTION @extschema@.running_transactions()
RETURNS text[]
AS 'MODULE_PATHNAME', 'claims_cell_running_transactions'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.running_transactions() FROM PUBLIC;
