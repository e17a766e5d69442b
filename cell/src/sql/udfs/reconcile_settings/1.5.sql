CREATE OR REPLACE FUNCTION @extschema@.reconcile_settings(OUT stale_after interval, OUT orphan_after interval,
                                               OUT cleanup_after interval)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_cell_reconcile_settings'
LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.reconcile_settings() FROM PUBLIC;
