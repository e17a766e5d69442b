-- The counters of claims_stats, per cell, from shared memory (needs
-- shared_preload_libraries = 'claims'), with what the stale lease reporter's
-- last run found for the cell. One row per cell counted since the server
-- started (at most 1024 cells; calls of further cells count in claims_stats
-- only). Reading it sums nothing and scans no table.
CREATE OR REPLACE FUNCTION @extschema@.claims_stats_by_cell(
    OUT cell_id bigint,
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
    OUT stale_leases bigint,
    OUT oldest_stale_age interval)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'claims_stats_by_cell'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.claims_stats_by_cell() IS
    'claims_stats per cell since the last reset, and the stale lease reporter''s latest findings per cell';
REVOKE ALL ON FUNCTION @extschema@.claims_stats_by_cell() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_stats_by_cell() TO pg_monitor;
