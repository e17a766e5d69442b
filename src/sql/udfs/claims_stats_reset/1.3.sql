CREATE OR REPLACE FUNCTION @extschema@.claims_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'claims_stats_reset'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.claims_stats_reset() IS
    'Start the claims_stats counters from zero';
REVOKE ALL ON FUNCTION @extschema@.claims_stats_reset() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_stats_reset() TO claims_admin;
