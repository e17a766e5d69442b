-- reconcile() keeps a fence after the store rolled its lease back, until no
-- transaction that started before the fence is running. Deleted in the
-- pass after the rollback, a fence left a writer that was slower than two
-- passes between its begin_update and its local lease row free to insert
-- that row and commit with a rolled-back lease (the crash rounds test,
-- cell/test/t/010_crash_rounds.pl, found it with stale_after = 0). Every
-- transaction that can hold the lease started before the fence: it took
-- the lease before the listing that found it, and the fence is stamped
-- with clock_timestamp() after that listing. So once none of them runs,
-- no one can insert the uuid any more. A fence is "settled" (rolled back)
-- when its updated_at is later than its created_at; settled fences are
-- not pending. Sessions whose xact_start the caller cannot see count as
-- old (the background worker runs as a superuser and sees them all).
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
            -- rolled back: kept while a transaction older than the fence runs
            IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a
                            WHERE a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
                              AND a.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()
                              AND (a.xact_start OPERATOR(pg_catalog.<=) loc.created_at
                                   OR (a.state IS NULL AND a.backend_type OPERATOR(pg_catalog.=) 'client backend'))) THEN
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
        -- stamped after the listing: every transaction that can hold the
        -- lease started before it
        stamp := pg_catalog.clock_timestamp();
        INSERT INTO @extschema@.outstanding_leases (uuid, fence, created_at, updated_at)
            VALUES (rem.uuid, true, stamp, stamp)
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
