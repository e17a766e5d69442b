-- reconcile() of 1.5: a fence never waits on a local transaction still
-- writing the lease's row (an immediate claim's open transaction); that
-- lease is left for a later pass.
CREATE OR REPLACE FUNCTION @extschema@.reconcile(full_scan boolean DEFAULT false)
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
    stamp timestamptz;
    running text[];
    waits text[];
    lost_uuids uuid[] := '{}';
    again record;
    saved_lock_timeout text := pg_catalog.current_setting('lock_timeout');
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
               pg_catalog.jsonb_build_object('created_at', l.created_at, 'fence', l.fence,
                                              'settled', l.fence AND l.updated_at OPERATOR(pg_catalog.>) l.created_at)), '{}'::jsonb),
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
    -- every transaction that can hold a listed lease runs now or has ended
    running := @extschema@.running_transactions();

    FOR loc IN SELECT k::uuid AS uuid, (v->>'created_at')::timestamptz AS created_at,
                      (v->>'fence')::boolean AS fence, (v->>'settled')::boolean AS settled,
                      remotes ? k AS listed
                 FROM pg_catalog.jsonb_each(locals) AS e(k, v) ORDER BY 2
    LOOP
        IF loc.fence AND loc.settled THEN
            NULL;   -- rolled back by an earlier pass: only its deletion is left
        ELSIF loc.fence THEN
            -- committed by an earlier pass: no local transaction can take it
            res := @extschema@.store_finish_lease(cfg.server_name, cfg.cell_id, loc.uuid, false);
            IF res.sqlstate IN ('00000', 'P0002', '55000') THEN
                IF res.sqlstate = '55000' THEN
                    RAISE WARNING 'claims_cell: lease % fenced for rollback was committed at the claims store: %',
                        loc.uuid, res.message;
                END IF;
                UPDATE @extschema@.outstanding_leases SET updated_at = pg_catalog.clock_timestamp()
                 WHERE uuid = loc.uuid AND fence;
                IF loc.listed AND res.sqlstate = '00000' THEN
                    rolled_back := rolled_back + 1;
                ELSE
                    orphans_deleted := orphans_deleted + 1;
                END IF;
            ELSE
                RAISE WARNING 'claims_cell: could not roll back lease % at the claims store: %',
                    loc.uuid, res.message;
                pending := pending + 1;
                CONTINUE;
            END IF;
        END IF;
        IF loc.fence THEN
            -- rolled back: kept while a transaction that ran when the fence
            -- was placed runs; a restart since then ended them all
            SELECT l.fence_waits_for INTO waits FROM @extschema@.outstanding_leases l
             WHERE l.uuid = loc.uuid AND l.fence;
            IF loc.created_at < pg_catalog.pg_postmaster_start_time() THEN
                DELETE FROM @extschema@.outstanding_leases WHERE uuid = loc.uuid AND fence;
            ELSIF waits IS NULL THEN
                -- placed before 1.4: those transactions, if any runs, run now
                UPDATE @extschema@.outstanding_leases SET fence_waits_for = running
                 WHERE uuid = loc.uuid AND fence;
            ELSIF @extschema@.transactions_ended(waits) THEN
                DELETE FROM @extschema@.outstanding_leases WHERE uuid = loc.uuid AND fence;
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
            ELSIF res.sqlstate IN ('55000', 'P0002') AND EXISTS (
                      SELECT 1 FROM @extschema@.outstanding_leases l
                       WHERE l.uuid OPERATOR(pg_catalog.=) loc.uuid AND NOT l.fence AND l.request IS NOT NULL) THEN
                -- the store lost (or rolled back) the lease of a committed
                -- local transaction, as a failover to a standby that had not
                -- received it does: claim its values again in a lease of this
                -- pass, committed at the store by this transaction's COMMIT
                lost_uuids := lost_uuids OPERATOR(pg_catalog.||) loc.uuid;
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

    -- leases the store lost (or rolled back) although their local
    -- transactions committed, as a failover to a standby that had not
    -- received them does: their values are brought to what the tables hold
    IF pg_catalog.cardinality(lost_uuids) > 0 THEN
        again := @extschema@.claim_again(cfg.server_name, cfg.cell_id,
            (SELECT pg_catalog.jsonb_agg(l.request) FROM @extschema@.outstanding_leases l
              WHERE l.uuid OPERATOR(pg_catalog.=) ANY (lost_uuids) AND NOT l.fence));
        IF again.pending THEN
            RAISE WARNING 'claims_cell: the claims store lost % leases of committed transactions; claiming their values again waits: %',
                pg_catalog.cardinality(lost_uuids), again.conflicts;
            pending := pending + pg_catalog.cardinality(lost_uuids);
        ELSE
            RAISE WARNING 'claims_cell: the claims store lost % leases of committed transactions; % of their values claimed again, % released',
                pg_catalog.cardinality(lost_uuids), again.claimed, again.released
                USING DETAIL = COALESCE('Not claimed: ' OPERATOR(pg_catalog.||) again.conflicts OPERATOR(pg_catalog.||) '.', 'Every value is as the tables hold it.');
            DELETE FROM @extschema@.outstanding_leases WHERE uuid = ANY (lost_uuids) AND NOT fence;
            committed := committed + pg_catalog.cardinality(lost_uuids);
        END IF;
    END IF;

    -- outstanding at the store without a local row
    FOR rem IN SELECT k::uuid AS uuid, (v #>> '{}')::timestamptz AS created_at
                 FROM pg_catalog.jsonb_each(remotes) AS e(k, v)
                WHERE NOT locals ? k ORDER BY 2
    LOOP
        IF rem.created_at > t0 OPERATOR(pg_catalog.-) s.stale_after THEN
            pending := pending + 1;
            CONTINUE;
        END IF;
        -- placed after the listing: every transaction that can hold the
        -- lease started before it, so it is one of running or has ended
        stamp := pg_catalog.clock_timestamp();
        placed := NULL;
        -- a local transaction still running may hold the lease's row
        -- uncommitted (an immediate claim in a session idle in transaction):
        -- the insert would wait for it without bound, holding the advisory
        -- lock and stopping the worker, so it waits not at all and leaves
        -- the lease to a later pass
        BEGIN
            PERFORM pg_catalog.set_config('lock_timeout', '1ms', true);
            INSERT INTO @extschema@.outstanding_leases (uuid, fence, created_at, updated_at, fence_waits_for)
                VALUES (rem.uuid, true, stamp, stamp, running)
                ON CONFLICT (uuid) DO NOTHING RETURNING true INTO placed;
            PERFORM pg_catalog.set_config('lock_timeout', saved_lock_timeout, true);
        EXCEPTION WHEN lock_not_available THEN
            pending := pending + 1;
            CONTINUE;
        END;
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
REVOKE ALL ON FUNCTION @extschema@.reconcile(boolean) FROM PUBLIC;
