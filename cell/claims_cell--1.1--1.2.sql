/* claims_cell--1.1--1.2.sql: the background worker's counters in stats. */

\echo Use "ALTER EXTENSION claims_cell UPDATE TO '1.2'" to load this file. \quit

-- stats gains the reconcile() passes of the background worker; the view
-- is recreated over the new function (its columns are the function's).
DROP VIEW @extschema@.stats;
DROP FUNCTION @extschema@.stats();

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

CREATE VIEW @extschema@.stats AS SELECT * FROM @extschema@.stats();

REVOKE ALL ON FUNCTION @extschema@.stats() FROM PUBLIC;
REVOKE ALL ON @extschema@.stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.stats() TO pg_monitor;
GRANT SELECT ON @extschema@.stats TO pg_monitor;
