/* claims_cell--1.3--1.4.sql: the cell side hardened. */

\echo Use "ALTER EXTENSION claims_cell UPDATE TO '1.4'" to load this file. \quit

-- The administrator functions written in C run their SQL under a pinned
-- search path, as the PL/pgSQL ones do: a name the caller's path resolves
-- (an operator planted in public by a database owner) must never run with
-- a superuser's privileges.
ALTER FUNCTION @extschema@.configure(name, bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.claim_column(regclass, name, text, text, name, text)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.set_claiming(regclass, name, boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.unclaim_column(regclass, name) SET search_path = pg_catalog, pg_temp;

-- stats gains the destroys of values the store did not hold: a row going
-- away releases what the store holds and counts the rest as drift
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
    OUT last_reconcile timestamptz,
    OUT verify_runs bigint, OUT verify_missing bigint, OUT verify_extra bigint,
    OUT verify_drifted bigint, OUT verify_repaired bigint, OUT last_verify timestamptz,
    OUT unclaimed_destroys bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_cell_stats'
LANGUAGE C VOLATILE;

CREATE VIEW @extschema@.stats AS SELECT * FROM @extschema@.stats();

REVOKE ALL ON FUNCTION @extschema@.stats() FROM PUBLIC;
REVOKE ALL ON @extschema@.stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.stats() TO pg_monitor;
GRANT SELECT ON @extschema@.stats TO pg_monitor;

-- verify() refuses a table the calling transaction changed: its rows are
-- claimed at COMMIT, so the store does not hold them yet, and a repair
-- would claim them twice
CREATE FUNCTION @extschema@.changed_in_transaction("table" regclass)
RETURNS boolean
AS 'MODULE_PATHNAME', 'claims_cell_changed_in_transaction'
LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.changed_in_transaction(regclass) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.verify("table" regclass, repair boolean DEFAULT false)
RETURNS TABLE (missing bigint, extra bigint, drifted bigint, repaired bigint, skipped_recent bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
BEGIN
    IF "table" IS NULL OR repair IS NULL THEN
        RAISE EXCEPTION 'table and repair must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF @extschema@.changed_in_transaction("table") THEN
        RAISE EXCEPTION 'cannot verify table % in a transaction that changed its claimed values', "table"
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'The transaction''s changes are claimed at its COMMIT; the store does not hold them yet.',
                  HINT = 'Commit first, then verify.';
    END IF;
    -- one verification of a table at a time (the worker's included)
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('claims_cell.verify'), "table"::oid::integer);
    r := @extschema@.verify_slice("table", repair, NULL, NULL);
    missing := r.missing; extra := r.extra; drifted := r.drifted;
    repaired := r.repaired; skipped_recent := r.skipped_recent;
    RETURN NEXT;
END
$$;

-- A lease's row keeps the request that took it: should the store lose the
-- lease (a failover to a standby that had not received it), reconcile()
-- claims the committed rows' values again from it.
ALTER TABLE @extschema@.outstanding_leases ADD COLUMN request jsonb;
COMMENT ON COLUMN @extschema@.outstanding_leases.request IS
    'The claims_begin_update request of the lease (NULL for fences and rows written before 1.4)';
