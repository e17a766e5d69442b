CREATE FUNCTION @extschema@.stats(
    OUT scope text, OUT calls bigint, OUT begin_updates bigint, OUT commits bigint,
    OUT rollbacks bigint, OUT conflicts_permanent bigint, OUT conflicts_temporary bigint,
    OUT refusals bigint, OUT failures bigint, OUT timeouts bigint, OUT breaker_rejections bigint,
    OUT breaker_state text, OUT in_flight integer, OUT avg_latency_ms double precision,
    OUT max_latency_ms double precision,
    OUT reconcile_passes bigint, OUT reconcile_committed bigint,
    OUT reconcile_rolled_back bigint, OUT reconcile_orphans_deleted bigint,
    OUT last_reconcile timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_cell_stats'
LANGUAGE C VOLATILE;
