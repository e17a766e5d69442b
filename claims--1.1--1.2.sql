/* claims--1.1--1.2.sql */

\echo Use "ALTER EXTENSION claims UPDATE TO '1.2'" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Monitoring: per-cell statistics and the oldest outstanding lease of each
-- cell, for Prometheus (monitoring/) and any other monitoring system.
-- ---------------------------------------------------------------------------

-- The counters of claims_stats, per cell, from shared memory (needs
-- shared_preload_libraries = 'claims'), with what the stale lease reporter's
-- last run found for the cell. One row per cell counted since the server
-- started (at most 1024 cells; calls of further cells count in claims_stats
-- only). Reading it sums nothing and scans no table.
CREATE FUNCTION @extschema@.claims_stats_by_cell(
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

CREATE VIEW @extschema@.claims_stats_by_cell AS
SELECT * FROM @extschema@.claims_stats_by_cell();

COMMENT ON FUNCTION @extschema@.claims_stats_by_cell() IS
    'claims_stats per cell since the last reset, and the stale lease reporter''s latest findings per cell';
COMMENT ON VIEW @extschema@.claims_stats_by_cell IS
    'claims_stats per cell since the last reset, and the stale lease reporter''s latest findings per cell';

REVOKE ALL ON FUNCTION @extschema@.claims_stats_by_cell() FROM PUBLIC;
REVOKE ALL ON TABLE @extschema@.claims_stats_by_cell FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_stats_by_cell() TO pg_monitor;
GRANT SELECT ON TABLE @extschema@.claims_stats_by_cell TO pg_monitor;

-- The oldest outstanding lease of every registered cell, live: one probe
-- of claim_leases_outstanding_idx (creator_id, created_at, uuid) WHERE
-- state = 'outstanding' per cell (its first entry under the cell id), so
-- the cost grows with the number of cells, not of leases. A cell without
-- an outstanding lease has a row with NULLs and age 0. No payload: the view
-- shows no personal data and is readable by pg_monitor.
CREATE VIEW @extschema@.claims_oldest_leases AS
SELECT c.cell_id,
       o.uuid AS lease_uuid,
       o.created_at,
       COALESCE(pg_catalog.now() OPERATOR(pg_catalog.-) o.created_at,
                '0'::pg_catalog.interval) AS age
  FROM @extschema@.claim_cells c
  LEFT JOIN LATERAL (
       SELECT l.uuid, l.created_at
         FROM @extschema@.claim_leases l
        WHERE l.creator_id OPERATOR(pg_catalog.=) c.cell_id
          AND l.state OPERATOR(pg_catalog.=) 'outstanding'::@extschema@.claim_lease_state
        ORDER BY l.created_at, l.uuid
        LIMIT 1) o ON true;

COMMENT ON VIEW @extschema@.claims_oldest_leases IS
    'Per registered cell, its oldest outstanding lease and its age (0 when none); one index probe per cell';

REVOKE ALL ON TABLE @extschema@.claims_oldest_leases FROM PUBLIC;
GRANT SELECT ON TABLE @extschema@.claims_oldest_leases TO pg_monitor, claims_admin;

-- Values per bucket type, from shared memory: values created, destroyed and
-- replaced by successful claims_begin_update calls, and values at fault in
-- refused ones by conflict (23505 permanent, 55P03 temporary; one refused
-- call may hold several). One row per type id below 256 counted since the
-- server started; the view adds the type's name.
CREATE FUNCTION @extschema@.claims_stats_by_bucket_type(
    OUT bucket_type integer,
    OUT values_created bigint,
    OUT values_destroyed bigint,
    OUT values_replaced bigint,
    OUT conflicts_permanent bigint,
    OUT conflicts_temporary bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'claims_stats_by_bucket_type'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW @extschema@.claims_stats_by_bucket_type AS
SELECT s.bucket_type, t.name AS bucket_type_name,
       s.values_created, s.values_destroyed, s.values_replaced,
       s.conflicts_permanent, s.conflicts_temporary
  FROM @extschema@.claims_stats_by_bucket_type() s
  LEFT JOIN @extschema@.claim_bucket_types t
         ON t.type_id OPERATOR(pg_catalog.=) s.bucket_type;

COMMENT ON FUNCTION @extschema@.claims_stats_by_bucket_type() IS
    'Values changed and values at fault in conflicts per bucket type since the last reset';
COMMENT ON VIEW @extschema@.claims_stats_by_bucket_type IS
    'Values changed and values at fault in conflicts per bucket type since the last reset';

REVOKE ALL ON FUNCTION @extschema@.claims_stats_by_bucket_type() FROM PUBLIC;
REVOKE ALL ON TABLE @extschema@.claims_stats_by_bucket_type FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_stats_by_bucket_type() TO pg_monitor;
GRANT SELECT ON TABLE @extschema@.claims_stats_by_bucket_type TO pg_monitor;
