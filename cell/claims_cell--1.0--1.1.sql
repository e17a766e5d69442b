/* claims_cell--1.0--1.1.sql: reconciliation of leases left unsettled. */

\echo Use "ALTER EXTENSION claims_cell UPDATE TO '1.1'" to load this file. \quit

-- A fence is a row claims_cell.reconcile() inserts for a lease it found
-- outstanding at the store without a local row: it takes the lease's uuid
-- so that no local transaction can commit with that lease any more, and it
-- is deleted once the store has rolled the lease back.
ALTER TABLE @extschema@.outstanding_leases ADD COLUMN fence boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN @extschema@.outstanding_leases.fence IS
    'Inserted by reconcile() to roll the lease back: no local transaction may commit with it';

-- One page of claims_list_leases at the store (raises 08006 when unreachable).
CREATE FUNCTION @extschema@.store_list_leases(server name, request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_cell_store_list_leases'
LANGUAGE C STRICT VOLATILE;

-- claims_commit or claims_rollback at the store; sqlstate '00000' on
-- success, the store's SQLSTATE, or 08006; never raises for the store.
CREATE FUNCTION @extschema@.store_finish_lease(server name, cell_id bigint, lease uuid,
                                               commit boolean,
                                               OUT sqlstate text, OUT message text)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_cell_store_finish_lease'
LANGUAGE C STRICT VOLATILE;

CREATE FUNCTION @extschema@.reconcile_settings(OUT stale_after interval, OUT orphan_after interval,
                                               OUT cleanup_after interval)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_cell_reconcile_settings'
LANGUAGE C STRICT VOLATILE;

/*
 * reconcile(): settle what can be settled now between the store's
 * outstanding leases of this cell and the local lease rows.
 *
 *  store lists   | local row  | age                         | action                       | counted
 *  outstanding   | present    | row older than stale_after  | commit at the store, delete  | committed
 *  outstanding   | present    | younger                     | nothing (its COMMIT is       | pending
 *                |            |                             | finishing it)                |
 *  outstanding   | absent     | lease older than stale_after| fence (see below)            | pending
 *  outstanding   | absent     | younger                     | nothing                      | pending
 *  not listed    | present    | row older than cleanup_after| claims_commit as a check:    |
 *                |            |                             | success: delete the row      | orphans_deleted
 *                |            |                             | 55000/P0002 and older than   | orphans_deleted
 *                |            |                             | orphan_after: delete, WARNING|
 *                |            |                             | otherwise nothing            | pending
 *  any           | fence      |                             | roll back at the store,      | rolled_back
 *                |            |                             | delete the fence             | (orphans_deleted
 *                |            |                             |                              | when not listed)
 *
 * A local row that is visible is committed, so its local transaction
 * committed and committing its lease is always right: claims_commit is
 * idempotent for a committed lease, so it is also the check that a lease
 * the store no longer lists was committed (55000: rolled back, P0002:
 * unknown).
 *
 * The fence. "No local row" cannot be told from "inserted by a local
 * transaction that has not committed yet" (a COMMIT waiting for
 * synchronous replication or another PRE_COMMIT). So before rolling back,
 * the uuid is inserted here as a fence row (ON CONFLICT DO NOTHING):
 *  - a local transaction holding the uuid uncommitted is waited for; if it
 *    commits, nothing is inserted and the lease is committed instead; if
 *    it aborts, the fence goes in;
 *  - a local transaction that inserts the uuid later waits for this
 *    transaction and, once the fence is committed, fails at its own COMMIT
 *    with 40001 (PRE_COMMIT maps the conflict), rolling its lease back.
 * The store rollback waits for the next pass: it must not happen before
 * the fence is committed. Rolled back in the fencing transaction, a crash
 * or error before that transaction commits would remove the fence after
 * the lease was rolled back, and a waiting local transaction would commit
 * with a rolled-back lease; and a fence deleted in the transaction that
 * inserted it is dead when that transaction commits, so a waiter would
 * insert its row and commit just the same. A function cannot commit in
 * the middle, so one pass fences and commits, the next rolls back and
 * deletes the fence in one transaction: a crash between the store
 * rollback and that commit leaves the fence, and the pass after repeats
 * the rollback (idempotent) and deletes it. A committed fence is never
 * committed at the store, whatever its age.
 *
 * Listing: leases created after the earlier of now - 2 h and 10 minutes
 * (clock skew between the cell and the store) before the oldest local
 * row, so every local row's lease is in the window when outstanding;
 * full_scan => true lists every outstanding lease, which finds remote-only
 * leases older than 2 h. The caller (today an operator or a scheduler, a
 * background worker later) runs it often, and with full_scan about once
 * an hour.
 *
 * Passes are serialised by a transaction-level advisory lock and run in
 * READ COMMITTED (0A000 otherwise), so that each statement sees what the
 * previous pass and the waited-for local transactions committed. The store's
 * calls run under claims_cell.call_timeout and the circuit breaker; a
 * lease whose call fails is counted pending with a WARNING; a failed
 * listing raises.
 */
CREATE FUNCTION @extschema@.reconcile(full_scan boolean DEFAULT false)
RETURNS TABLE (committed bigint, rolled_back bigint, orphans_deleted bigint, pending bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg record;
    s record;
    res record;
    loc record;
    rem record;
    t0 timestamptz := pg_catalog.clock_timestamp();
    locals jsonb;
    remotes jsonb := '{}';
    oldest timestamptz;
    req jsonb;
    page jsonb;
    placed boolean;
BEGIN
    committed := 0; rolled_back := 0; orphans_deleted := 0; pending := 0;
    -- each statement must see what committed before it: the fences of the
    -- previous pass, the rows of local transactions the fence waited for
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'claims_cell.reconcile() must run in a READ COMMITTED transaction'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('claims_cell.reconcile'));
    SELECT c.server_name, c.cell_id INTO cfg FROM @extschema@.configuration c;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'claims_cell is not configured'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Call claims_cell.configure(server_name, cell_id) first.';
    END IF;
    s := @extschema@.reconcile_settings();

    -- local rows first: a row seen here was written after its lease was
    -- taken, so the listing below shows the lease if it is outstanding
    SELECT COALESCE(pg_catalog.jsonb_object_agg(l.uuid,
               pg_catalog.jsonb_build_object('created_at', l.created_at, 'fence', l.fence)), '{}'::jsonb),
           pg_catalog.min(l.created_at) FILTER (WHERE NOT l.fence)
      INTO locals, oldest
      FROM @extschema@.outstanding_leases l;

    req := pg_catalog.jsonb_build_object('cell_id', cfg.cell_id, 'limit', 1000);
    IF NOT full_scan THEN
        req := req OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object('created_after',
            pg_catalog.to_char(LEAST(t0 OPERATOR(pg_catalog.-) interval '2 hours',
                                                oldest OPERATOR(pg_catalog.-) interval '10 minutes')
                               AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'));
    END IF;
    LOOP
        page := @extschema@.store_list_leases(cfg.server_name, req);
        remotes := remotes OPERATOR(pg_catalog.||) COALESCE(
            (SELECT pg_catalog.jsonb_object_agg(e->>'uuid', e->'created_at')
               FROM pg_catalog.jsonb_array_elements(page->'leases') AS e), '{}'::jsonb);
        EXIT WHEN NOT (page ? 'next');
        req := req OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object('next', page->'next');
    END LOOP;

    FOR loc IN SELECT k::uuid AS uuid, (v->>'created_at')::timestamptz AS created_at,
                      (v->>'fence')::boolean AS fence, remotes ? k AS listed
                 FROM pg_catalog.jsonb_each(locals) AS e(k, v) ORDER BY 2
    LOOP
        IF loc.fence THEN
            -- committed by an earlier pass: no local transaction can take it
            res := @extschema@.store_finish_lease(cfg.server_name, cfg.cell_id, loc.uuid, false);
            IF res.sqlstate IN ('00000', 'P0002', '55000') THEN
                IF res.sqlstate = '55000' THEN
                    RAISE WARNING 'claims_cell: lease % fenced for rollback was committed at the claims store: %',
                        loc.uuid, res.message;
                END IF;
                DELETE FROM @extschema@.outstanding_leases WHERE uuid = loc.uuid AND fence;
                IF loc.listed AND res.sqlstate = '00000' THEN
                    rolled_back := rolled_back + 1;
                ELSE
                    orphans_deleted := orphans_deleted + 1;
                END IF;
            ELSE
                RAISE WARNING 'claims_cell: could not roll back lease % at the claims store: %',
                    loc.uuid, res.message;
                pending := pending + 1;
            END IF;
        ELSIF loc.listed THEN
            IF loc.created_at > t0 OPERATOR(pg_catalog.-) s.stale_after THEN
                pending := pending + 1;     -- its own COMMIT is finishing it
                CONTINUE;
            END IF;
            res := @extschema@.store_finish_lease(cfg.server_name, cfg.cell_id, loc.uuid, true);
            IF res.sqlstate = '00000' THEN
                DELETE FROM @extschema@.outstanding_leases WHERE uuid = loc.uuid AND NOT fence;
                committed := committed + 1;
            ELSE
                RAISE WARNING 'claims_cell: could not commit lease % at the claims store: %',
                    loc.uuid, res.message;
                pending := pending + 1;
            END IF;
        ELSE
            IF loc.created_at > t0 OPERATOR(pg_catalog.-) s.cleanup_after THEN
                pending := pending + 1;
                CONTINUE;
            END IF;
            -- finished at the store: a repeated commit says how
            res := @extschema@.store_finish_lease(cfg.server_name, cfg.cell_id, loc.uuid, true);
            IF res.sqlstate = '00000' THEN
                DELETE FROM @extschema@.outstanding_leases WHERE uuid = loc.uuid AND NOT fence;
                orphans_deleted := orphans_deleted + 1;
            ELSIF res.sqlstate IN ('55000', 'P0002')
                  AND loc.created_at <= t0 OPERATOR(pg_catalog.-) s.orphan_after THEN
                RAISE WARNING 'claims_cell: deleting the local row of lease %, which the claims store % ',
                    loc.uuid, CASE res.sqlstate WHEN '55000' THEN 'rolled back' ELSE 'does not know' END
                    USING DETAIL = 'The local transaction committed; its claimed values may not be claimed at the store.';
                DELETE FROM @extschema@.outstanding_leases WHERE uuid = loc.uuid AND NOT fence;
                orphans_deleted := orphans_deleted + 1;
            ELSE
                IF res.sqlstate NOT IN ('55000', 'P0002') THEN
                    RAISE WARNING 'claims_cell: could not check lease % at the claims store: %',
                        loc.uuid, res.message;
                END IF;
                pending := pending + 1;
            END IF;
        END IF;
    END LOOP;

    -- outstanding at the store without a local row
    FOR rem IN SELECT k::uuid AS uuid, (v #>> '{}')::timestamptz AS created_at
                 FROM pg_catalog.jsonb_each(remotes) AS e(k, v)
                WHERE NOT locals ? k ORDER BY 2
    LOOP
        IF rem.created_at > t0 OPERATOR(pg_catalog.-) s.stale_after THEN
            pending := pending + 1;
            CONTINUE;
        END IF;
        INSERT INTO @extschema@.outstanding_leases (uuid, fence) VALUES (rem.uuid, true)
            ON CONFLICT (uuid) DO NOTHING RETURNING true INTO placed;
        IF placed THEN
            pending := pending + 1;         -- rolled back by the next pass
            CONTINUE;
        END IF;
        -- a local transaction inserted the uuid and committed: its lease stands
        IF EXISTS (SELECT 1 FROM @extschema@.outstanding_leases l WHERE l.uuid = rem.uuid AND l.fence) THEN
            pending := pending + 1;
            CONTINUE;
        END IF;
        res := @extschema@.store_finish_lease(cfg.server_name, cfg.cell_id, rem.uuid, true);
        IF res.sqlstate = '00000' THEN
            DELETE FROM @extschema@.outstanding_leases WHERE uuid = rem.uuid AND NOT fence;
            committed := committed + 1;
        ELSE
            RAISE WARNING 'claims_cell: could not commit lease % at the claims store: %',
                rem.uuid, res.message;
            pending := pending + 1;
        END IF;
    END LOOP;
    RETURN NEXT;
END
$$;
COMMENT ON FUNCTION @extschema@.reconcile(boolean) IS
    'Settle leases left outstanding at the store or locally; full_scan lists every outstanding lease';

REVOKE ALL ON FUNCTION @extschema@.store_list_leases(name, jsonb),
    @extschema@.store_finish_lease(name, bigint, uuid, boolean),
    @extschema@.reconcile_settings(),
    @extschema@.reconcile(boolean) FROM PUBLIC;
