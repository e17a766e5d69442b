CREATE OR REPLACE FUNCTION @extschema@.stats(
    OUT scope text, OUT calls bigint, OUT begin_updates bigint, OUT commits bigint,
    OUT rollbacks bigint, OUT conflicts_permanent bigint, OUT conflicts_temporary bigint,
    OUT refusals bigint, OUT failures bigint, OUT timeouts bigint, OUT breaker_rejections bigint,
    OUT breaker_state text, OUT in_flight integer, OUT avg_latency_ms double precision,
    OUT max_latency_ms double precision,
    OUT reconcile_passes bigint, OUT reconcile_committed bigint,
    OUT reconcile_rolled_back bigint, OUT reconcile_orphans_deleted bigint,
    OUT last_reconcile timestamptz,
    OUT verify_runs bigint, OUT verify_missing bigint, OUT verify_extra bigint,
    OUT verify_drifted bigint, OUT verify_repaired bigint, OUT last_verify timestamptz,
    OUT unclaimed_destroys bigint, OUT reconcile_failures bigint,
    OUT latency_count bigint, OUT latency_sum_ms double precision)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_cell_stats'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.stats() TO pg_monitor;
