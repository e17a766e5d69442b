-- Statistics in shared memory (needs shared_preload_libraries = 'claims').
-- Counts are of calls since the last reset, taken before the caller's
-- transaction commits; errors are counted when raised.
CREATE OR REPLACE FUNCTION @extschema@.claims_stats(
    OUT begin_updates bigint,
    OUT claims_created bigint,
    OUT claims_destroyed bigint,
    OUT claims_replaced bigint,
    OUT commits bigint,
    OUT rollbacks bigint,
    OUT repeated_commits bigint,
    OUT repeated_rollbacks bigint,
    OUT conflicts_permanent bigint,
    OUT conflicts_temporary bigint,
    OUT malformed_requests bigint,
    OUT ownership_violations bigint,
    OUT not_found bigint,
    OUT worker_last_run timestamptz,
    OUT stale_leases bigint,
    OUT oldest_stale_age interval,
    OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_stats'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.claims_stats() IS
    'Counts of API calls and outcomes since the last reset, and the stale lease reporter''s latest findings';
REVOKE ALL ON FUNCTION @extschema@.claims_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_stats() TO pg_monitor;
