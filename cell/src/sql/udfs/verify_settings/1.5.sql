CREATE OR REPLACE FUNCTION @extschema@.verify_settings(OUT verify_recent interval,
                                            OUT verify_interval interval,
                                            OUT max_batch_size integer)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_cell_verify_settings'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.verify_settings() FROM PUBLIC;
