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

-- ---------------------------------------------------------------------------
-- Fences wait for transactions, not for pg_stat_activity.
--
-- reconcile() deleted a settled fence once pg_stat_activity showed no
-- session with an older xact_start. That view hides what a session does
-- when it runs with track_activities = off, and a writer it hides, frozen
-- between its begin_update and its local lease row, could insert that row
-- after the fence was gone and commit with a lease the store had rolled
-- back. A fence now records the virtual transaction ids running when it is
-- placed (after the listing that found its lease: the writer that holds the
-- lease is one of them) and is deleted only when all of them have ended,
-- tested on their locks as CREATE INDEX CONCURRENTLY waits; or when the
-- server restarted since it was placed. Fences placed before 1.4 record the
-- transactions running at the next pass.
-- ---------------------------------------------------------------------------
ALTER TABLE @extschema@.outstanding_leases ADD COLUMN fence_waits_for text[];
COMMENT ON COLUMN @extschema@.outstanding_leases.fence_waits_for IS
    'A fence''s: the virtual transaction ids running when it was placed; it is deleted only once all of them ended';

-- The virtual transaction ids of the transactions running in this database
-- but the caller's (every session, whatever pg_stat_activity shows of it).
CREATE FUNCTION @extschema@.running_transactions()
RETURNS text[]
AS 'MODULE_PATHNAME', 'claims_cell_running_transactions'
LANGUAGE C VOLATILE;

-- Whether every one of these virtual transactions has ended (never waits).
CREATE FUNCTION @extschema@.transactions_ended(vxids text[])
RETURNS boolean
AS 'MODULE_PATHNAME', 'claims_cell_transactions_ended'
LANGUAGE C STRICT VOLATILE;

-- One record at the store, for claim_again().
CREATE FUNCTION @extschema@.store_get_record(server name, request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_cell_store_get_record'
LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.store_get_record(name, jsonb) FROM PUBLIC;

-- The rows of a claimed column holding a value, locked FOR SHARE NOWAIT
-- until the transaction ends, read as the table's owner (its code never
-- runs with the caller's privileges).
CREATE FUNCTION @extschema@.rows_holding("table" regclass, attnum smallint, value text,
                                         subject_attnum smallint, source_attnum smallint)
RETURNS TABLE (source_id bytea, subject bigint)
AS 'MODULE_PATHNAME', 'claims_cell_rows_holding'
LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.rows_holding(regclass, smallint, text, smallint, smallint) FROM PUBLIC;

-- One lease of claim_again(): items are {"create": record} or {"destroy":
-- record}; state '00000' with the lease taken in the calling
-- transaction, else the store's refusal or why it could not be reached.
CREATE FUNCTION @extschema@.claim_again_lease(server name, cell_id bigint, items jsonb,
                                              OUT state text, OUT message text,
                                              OUT creates integer, OUT destroys integer)
RETURNS record
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c jsonb := COALESCE((SELECT pg_catalog.jsonb_agg(e->'create') FROM pg_catalog.jsonb_array_elements(items) e
                          WHERE e ? 'create'), '[]'::jsonb);
    d jsonb := COALESCE((SELECT pg_catalog.jsonb_agg(e->'destroy') FROM pg_catalog.jsonb_array_elements(items) e
                          WHERE e ? 'destroy'), '[]'::jsonb);
BEGIN
    creates := pg_catalog.jsonb_array_length(c);
    destroys := pg_catalog.jsonb_array_length(d);
    BEGIN
        SELECT x.sqlstate, x.message INTO state, message
          FROM @extschema@.store_repair_lease(server, cell_id, c, d) x;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
    END;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.claim_again_lease(name, bigint, jsonb) FROM PUBLIC;

-- The values of leases the store lost although their local transactions
-- committed (requests: a JSON array of their claims_begin_update
-- requests). Each value is brought to what the cell's tables hold now,
-- not to what the lost leases asked (later transactions may have changed
-- it): held by one row of a claimed column and claimed by nobody, it is
-- claimed for that row; held by no row and claimed by this cell, it is
-- released. The holding rows stay locked until the calling transaction
-- ends, and its COMMIT commits the leases, taken in chunks of at most
-- min(1000, claims_cell.max_batch_size) records (a refused chunk value by
-- value). pending: a row or value is busy now, or the store could not be
-- reached (next pass); conflicts: values another cell claimed meanwhile,
-- two rows hold, or the store refused alone (verify() reports them).
CREATE FUNCTION @extschema@.claim_again(server name, cell_id bigint, requests jsonb,
                                        OUT claimed integer, OUT released integer,
                                        OUT pending boolean, OUT conflicts text)
RETURNS record
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v record;
    a record;
    h record;
    holders jsonb;
    paused boolean;
    rec jsonb;
    owner bigint;
    items jsonb := '[]';
    chunk jsonb;
    one jsonb;
    r record;
    msg text;
    chunk_limit integer := LEAST(1000, (@extschema@.verify_settings()).max_batch_size);
BEGIN
    claimed := 0; released := 0; pending := false;
    FOR v IN
        SELECT DISTINCT e->'bucket'->>'type' AS btype, e->'bucket'->>'value' AS value
          FROM pg_catalog.jsonb_array_elements(requests) q,
               LATERAL (SELECT x FROM pg_catalog.jsonb_array_elements(COALESCE(q->'create_records', '[]'::jsonb)) x
                        UNION ALL
                        SELECT x FROM pg_catalog.jsonb_array_elements(COALESCE(q->'destroy_records', '[]'::jsonb)) x) AS r(e)
         ORDER BY 1, 2
    LOOP
        holders := '[]';
        paused := false;
        BEGIN
            FOR a IN SELECT c.table_name, c.attnum, c.subject_attnum, c.source_attnum, c.subject_type,
                            c.source_type, c.enabled
                       FROM @extschema@.claimed_attributes c
                      WHERE c.bucket_type OPERATOR(pg_catalog.=) v.btype
            LOOP
                FOR h IN SELECT * FROM @extschema@.rows_holding(a.table_name, a.attnum, v.value,
                                                                a.subject_attnum, a.source_attnum)
                LOOP
                    IF NOT a.enabled THEN
                        paused := true;     -- a paused column's value: left as it is
                    END IF;
                    holders := holders OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
                        'bucket', pg_catalog.jsonb_build_object('type', v.btype, 'value', v.value),
                        'subject', pg_catalog.jsonb_build_object('type', a.subject_type, 'id', h.subject::pg_catalog.text),
                        'source', pg_catalog.jsonb_build_object('type', a.source_type,
                                                                'rails_primary_key_id', @extschema@.source_id_text(h.source_id))));
                END LOOP;
            END LOOP;
        EXCEPTION WHEN lock_not_available THEN
            pending := true;    -- a writer holds a row of the value: next pass
            CONTINUE;
        END;
        BEGIN
            rec := @extschema@.store_get_record(server, pg_catalog.jsonb_build_object('bucket',
                       pg_catalog.jsonb_build_object('type', v.btype, 'value', v.value)));
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
            pending := true;
            conflicts := COALESCE(conflicts OPERATOR(pg_catalog.||) '; ', '') OPERATOR(pg_catalog.||) msg;
            RETURN;
        END;
        owner := (rec->'record'->>'cell_id')::bigint;
        IF paused THEN
            NULL;
        ELSIF rec IS NOT NULL AND rec->'record'->>'status' IS DISTINCT FROM 'ACTIVE' THEN
            pending := true;    -- under a lease now: its transaction decides, look again next pass
        ELSIF pg_catalog.jsonb_array_length(holders) > 1 THEN
            conflicts := COALESCE(conflicts OPERATOR(pg_catalog.||) '; ', '') OPERATOR(pg_catalog.||)
                pg_catalog.format('{%s=%s} is held by %s rows', v.btype, v.value, pg_catalog.jsonb_array_length(holders));
        ELSIF pg_catalog.jsonb_array_length(holders) = 1 AND rec IS NULL THEN
            items := items OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_array(
                pg_catalog.jsonb_build_object('create', holders->0));
        ELSIF pg_catalog.jsonb_array_length(holders) = 1 AND owner OPERATOR(pg_catalog.<>) cell_id THEN
            conflicts := COALESCE(conflicts OPERATOR(pg_catalog.||) '; ', '') OPERATOR(pg_catalog.||)
                pg_catalog.format('{%s=%s} is claimed by cell %s', v.btype, v.value, owner);
        ELSIF pg_catalog.jsonb_array_length(holders) = 0 AND owner OPERATOR(pg_catalog.=) cell_id THEN
            items := items OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object('destroy',
                pg_catalog.jsonb_build_object('bucket', pg_catalog.jsonb_build_object('type', v.btype, 'value', v.value))));
        END IF;
    END LOOP;
    -- the leases, in chunks; a refused chunk value by value
    FOR chunk IN
        SELECT pg_catalog.jsonb_agg(i.item ORDER BY i.n)
          FROM pg_catalog.jsonb_array_elements(items) WITH ORDINALITY AS i(item, n)
         GROUP BY (i.n OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog./) chunk_limit
    LOOP
        r := @extschema@.claim_again_lease(server, cell_id, chunk);
        IF r.state OPERATOR(pg_catalog.=) '00000' THEN
            claimed := claimed + r.creates;
            released := released + r.destroys;
            CONTINUE;
        ELSIF r.state NOT IN ('23505', '55P03', 'P0002', '42501') THEN
            pending := true;    -- unreachable: next pass
            conflicts := COALESCE(conflicts OPERATOR(pg_catalog.||) '; ', '') OPERATOR(pg_catalog.||) r.message;
            RETURN;
        END IF;
        FOR one IN SELECT pg_catalog.jsonb_build_array(e) FROM pg_catalog.jsonb_array_elements(chunk) e LOOP
            r := @extschema@.claim_again_lease(server, cell_id, one);
            IF r.state OPERATOR(pg_catalog.=) '00000' THEN
                claimed := claimed + r.creates;
                released := released + r.destroys;
            ELSIF r.state OPERATOR(pg_catalog.=) '55P03' THEN
                pending := true;
            ELSIF r.state NOT IN ('23505', 'P0002', '42501') THEN
                pending := true;
                conflicts := COALESCE(conflicts OPERATOR(pg_catalog.||) '; ', '') OPERATOR(pg_catalog.||) r.message;
                RETURN;
            ELSE
                conflicts := COALESCE(conflicts OPERATOR(pg_catalog.||) '; ', '') OPERATOR(pg_catalog.||) r.message;
            END IF;
        END LOOP;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.claim_again(name, bigint, jsonb) FROM PUBLIC;

-- reconcile() of 1.2, its fences recording and waiting for transactions.
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
        INSERT INTO @extschema@.outstanding_leases (uuid, fence, created_at, updated_at, fence_waits_for)
            VALUES (rem.uuid, true, stamp, stamp, running)
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

REVOKE ALL ON FUNCTION @extschema@.running_transactions(),
    @extschema@.transactions_ended(text[]) FROM PUBLIC;
-- ---------------------------------------------------------------------------
-- End of: fences wait for transactions.
-- ---------------------------------------------------------------------------

-- char(n) values are claimed without their padding from 1.4 on, as their
-- cast to text and verify() read them; the claims a cell made before hold
-- the padded form. The background worker verifies (and repairs) the
-- tables with such columns first: a run is started for each now. Until it
-- is done, another cell could claim a value's unpadded form.
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT DISTINCT c.table_name
               FROM @extschema@.claimed_attributes c
               JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.table_name
                    AND a.attnum OPERATOR(pg_catalog.=) c.attnum
              WHERE pg_catalog.format_type(a.atttypid, NULL) OPERATOR(pg_catalog.=) 'character'
                 OR EXISTS (SELECT 1 FROM pg_catalog.pg_type d
                             WHERE d.oid OPERATOR(pg_catalog.=) a.atttypid AND d.typtype OPERATOR(pg_catalog.=) 'd'
                               AND d.typbasetype OPERATOR(pg_catalog.=) 'pg_catalog.bpchar'::pg_catalog.regtype)
    LOOP
        INSERT INTO @extschema@.verify_progress (table_name, run_started_at) VALUES (t, pg_catalog.now())
            ON CONFLICT (table_name) DO UPDATE SET run_started_at = pg_catalog.now(), resume_after = NULL;
        RAISE NOTICE 'claims_cell: table % claims a char(n) column: run SELECT * FROM claims_cell.verify(%, repair => true) now (the background worker starts it too)',
            t, pg_catalog.quote_literal(t::pg_catalog.text);
    END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- Monitoring: reconcile() passes of the background worker that failed, the
-- number and total time of the calls that reached the store (averages over
-- any interval from two readings), and the cell's id in claims_cell.stats
-- (for the cell_id label of the Prometheus metrics in monitoring/;
-- pg_monitor cannot read the configuration table itself).
-- ---------------------------------------------------------------------------
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
    OUT unclaimed_destroys bigint, OUT reconcile_failures bigint,
    OUT latency_count bigint, OUT latency_sum_ms double precision)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_cell_stats'
LANGUAGE C VOLATILE;

-- cell_id is NULL until claims_cell.configure() ran
CREATE VIEW @extschema@.stats AS
SELECT s.*,
       (SELECT c.cell_id FROM @extschema@.configuration c) AS cell_id
  FROM @extschema@.stats() s;

REVOKE ALL ON FUNCTION @extschema@.stats() FROM PUBLIC;
REVOKE ALL ON @extschema@.stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.stats() TO pg_monitor;
GRANT SELECT ON @extschema@.stats TO pg_monitor;

-- ---------------------------------------------------------------------------
-- Immediate and deferred claims.
--
-- A claimed column is claimed at the end of each statement, as a unique
-- constraint is checked, unless it is deferrable and deferred (then at
-- COMMIT, as every claimed column was before 1.4). Declarations made
-- before 1.4 keep that: deferrable, initially deferred. New ones are
-- immediate unless claim_column says otherwise.
-- ---------------------------------------------------------------------------
ALTER TABLE @extschema@.claimed_attributes
    ADD COLUMN "deferrable" boolean NOT NULL DEFAULT true,
    ADD COLUMN initially_deferred boolean NOT NULL DEFAULT true,
    ADD CONSTRAINT claimed_attributes_deferred_is_deferrable CHECK ("deferrable" OR NOT initially_deferred);
ALTER TABLE @extschema@.claimed_attributes
    ALTER COLUMN "deferrable" SET DEFAULT false,
    ALTER COLUMN initially_deferred SET DEFAULT false;

CREATE OR REPLACE VIEW @extschema@.claimed_columns AS
SELECT c.table_name, a.attname AS column_name, c.bucket_type, c.subject_type,
       s.attname AS subject_column, c.source_type, k.attname AS source_column,
       c.enabled, c.trigger_name, c.created_at, c.updated_at,
       c."deferrable", c.initially_deferred
  FROM @extschema@.claimed_attributes c
  JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.table_name AND a.attnum OPERATOR(pg_catalog.=) c.attnum
  JOIN pg_catalog.pg_attribute s ON s.attrelid OPERATOR(pg_catalog.=) c.table_name AND s.attnum OPERATOR(pg_catalog.=) c.subject_attnum
  JOIN pg_catalog.pg_attribute k ON k.attrelid OPERATOR(pg_catalog.=) c.table_name AND k.attnum OPERATOR(pg_catalog.=) c.source_attnum;

DROP FUNCTION @extschema@.claim_column(regclass, name, text, text, name, text);
CREATE FUNCTION @extschema@.claim_column("table" regclass, "column" name, bucket_type text,
                                         subject_type text, subject_column name,
                                         source_type text DEFAULT NULL,
                                         "deferrable" boolean DEFAULT false,
                                         initially_deferred boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_claim_column'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.claim_column(regclass, name, text, text, name, text, boolean, boolean) IS
    'Claim the values of a column at the store from now on, at the end of each statement or (deferred) at COMMIT';
REVOKE ALL ON FUNCTION @extschema@.claim_column(regclass, name, text, text, name, text, boolean, boolean) FROM PUBLIC;

-- Statement trigger of claimed tables: claims the statement's immediate changes.
CREATE FUNCTION @extschema@.claim_statement()
RETURNS trigger
AS 'MODULE_PATHNAME', 'claims_cell_claim_statement'
LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.claim_statement() FROM PUBLIC;

-- SET CONSTRAINTS for claimed columns, for the rest of the transaction:
-- mode 'IMMEDIATE' or 'DEFERRED'; no table: every deferrable claimed
-- column; a table without a column: its deferrable claimed columns.
CREATE FUNCTION @extschema@.set_constraints(mode text, "table" regclass DEFAULT NULL,
                                            "column" name DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_set_constraints'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.set_constraints(text, regclass, name) IS
    'SET CONSTRAINTS for claimed columns: claim them at the end of each statement (IMMEDIATE) or at COMMIT (DEFERRED)';
GRANT EXECUTE ON FUNCTION @extschema@.set_constraints(text, regclass, name) TO PUBLIC;

DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT DISTINCT c.table_name FROM @extschema@.claimed_attributes c
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger g
                        WHERE g.tgrelid OPERATOR(pg_catalog.=) t
                          AND g.tgname OPERATOR(pg_catalog.=) 'claims_cell_statement') THEN
            EXECUTE pg_catalog.format('CREATE TRIGGER claims_cell_statement AFTER INSERT OR UPDATE OR DELETE ON %s'
                                      ' FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claim_statement()', t);
        END IF;
    END LOOP;
END
$$;

-- DROP COLUMN of the last claimed column drops the statement trigger too.
CREATE OR REPLACE FUNCTION @extschema@.forget_dropped()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    gone record;
BEGIN
    -- DROP EXTENSION drops the table itself
    IF pg_catalog.to_regclass('@extschema@.claimed_attributes') IS NULL
       OR pg_catalog.to_regclass('@extschema@.verify_progress') IS NULL THEN
        RETURN;
    END IF;
    -- a dropped table's verification progress goes with it
    DELETE FROM @extschema@.verify_progress p
     USING pg_catalog.pg_event_trigger_dropped_objects() d
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
       AND d.objid OPERATOR(pg_catalog.=) p.table_name AND d.objsubid OPERATOR(pg_catalog.=) 0;
    FOR gone IN
        DELETE FROM @extschema@.claimed_attributes c
         USING pg_catalog.pg_event_trigger_dropped_objects() d
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.objid OPERATOR(pg_catalog.=) c.table_name
           AND d.objsubid IN (0, c.attnum, c.subject_attnum, c.source_attnum)
        RETURNING c.table_name, c.attnum, c.trigger_name, d.objsubid, d.object_identity
    LOOP
        IF gone.objsubid OPERATOR(pg_catalog.<>) 0 THEN
            -- a column of a table that stays: its trigger would fail
            EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS %I ON %s',
                                      gone.trigger_name, gone.table_name);
            IF NOT EXISTS (SELECT 1 FROM @extschema@.claimed_attributes c
                            WHERE c.table_name OPERATOR(pg_catalog.=) gone.table_name) THEN
                EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS claims_cell_truncate ON %s',
                                          gone.table_name);
                IF EXISTS (SELECT 1 FROM pg_catalog.pg_trigger g
                            WHERE g.tgrelid OPERATOR(pg_catalog.=) gone.table_name
                              AND g.tgname OPERATOR(pg_catalog.=) 'claims_cell_statement') THEN
                    EXECUTE pg_catalog.format('DROP TRIGGER claims_cell_statement ON %s',
                                              gone.table_name);
                END IF;
            END IF;
            RAISE NOTICE 'a column of table % is no longer claimed: column % was dropped',
                gone.table_name, gone.object_identity;
        END IF;
    END LOOP;
END
$$;
-- ---------------------------------------------------------------------------
-- End of: immediate and deferred claims.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- TRUNCATE of a claimed table releases its values, as DELETE would.
-- ---------------------------------------------------------------------------
CREATE FUNCTION @extschema@.collect_truncate()
RETURNS trigger
AS 'MODULE_PATHNAME', 'claims_cell_collect_truncate'
LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.collect_truncate() FROM PUBLIC;

DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT g.tgrelid FROM pg_catalog.pg_trigger g
              WHERE g.tgname OPERATOR(pg_catalog.=) 'claims_cell_truncate'
                AND g.tgfoid OPERATOR(pg_catalog.=) '@extschema@.refuse_truncate()'::pg_catalog.regprocedure
                AND g.tgrelid IN (SELECT c.table_name FROM @extschema@.claimed_attributes c)
    LOOP
        EXECUTE pg_catalog.format('DROP TRIGGER claims_cell_truncate ON %s', t);
        EXECUTE pg_catalog.format('CREATE TRIGGER claims_cell_truncate BEFORE TRUNCATE ON %s'
                                  ' FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.collect_truncate()', t);
    END LOOP;
END
$$;
-- ---------------------------------------------------------------------------
-- End of: TRUNCATE releases.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- A cell database knows it is itself: configure() records the cluster's
-- system identifier and the database's oid; a copy (CREATE DATABASE ...
-- TEMPLATE, a restore elsewhere, pg_upgrade) has another one of them and
-- claims nothing until configure() runs in it again.
-- ---------------------------------------------------------------------------
ALTER TABLE @extschema@.configuration
    ADD COLUMN system_identifier bigint,
    ADD COLUMN database_oid oid;
COMMENT ON COLUMN @extschema@.configuration.system_identifier IS
    'pg_control_system().system_identifier of the cluster configure() ran in';
COMMENT ON COLUMN @extschema@.configuration.database_oid IS
    'The oid of the database configure() ran in';
UPDATE @extschema@.configuration
   SET system_identifier = (SELECT s.system_identifier FROM pg_catalog.pg_control_system() s),
       database_oid = (SELECT d.oid FROM pg_catalog.pg_database d
                        WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database());
-- ---------------------------------------------------------------------------
-- End of: a cell database knows it is itself.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- verify(): a batch whose second listing of the store's records is the same
-- as the first is not compared again (the comparison would give the same
-- result). In a backfill every row differs, so every batch was compared
-- twice with identical inputs.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION @extschema@.verify_slice("table" regclass, repair boolean, resume_after bytea,
                                         deadline timestamptz,
                                         OUT missing bigint, OUT extra bigint, OUT drifted bigint,
                                         OUT repaired bigint, OUT skipped_recent bigint,
                                         OUT last_source_id bytea, OUT done boolean)
RETURNS record
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tab regclass := "table";
    cfg record;
    st record;
    keycol record;
    a record;
    other record;
    attrs jsonb;
    enc text := pg_catalog.current_setting('server_encoding');
    cutoff timestamptz;
    sid_expr text;
    recent_expr text;
    cols text;
    entries_sql text;
    lateral_vals text := '';
    rows_sql text;
    key_expr text;
    lo bytea := resume_after;
    hi bytea;
    lo_int bigint;
    nrows integer;
    maxsid bytea;
    recent_sids text[];
    expected jsonb;
    stored jsonb;
    stored2 jsonb;
    pass integer;
    held_where text := '';
    moved text[] := '{}';
    cls record;
    fixes jsonb;
    fresh jsonb;
    fresh_n integer;
    fresh_max bytea;
    fresh_recent text[];
    chunk_limit integer;
BEGIN
    missing := 0; extra := 0; drifted := 0; repaired := 0; skipped_recent := 0; done := false;
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'claims_cell.verify() must run in a READ COMMITTED transaction'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Each batch must compare the rows committed now with the claims at the store now.';
    END IF;
    SELECT c.server_name, c.cell_id INTO cfg FROM @extschema@.configuration c;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'claims_cell is not configured'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Call claims_cell.configure(server_name, cell_id) first.';
    END IF;
    st := @extschema@.verify_settings();
    chunk_limit := LEAST(1000, st.max_batch_size);

    SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
               'col', v.attname, 'bucket_type', c.bucket_type, 'subject_type', c.subject_type,
               'subject_col', s.attname, 'source_type', c.source_type,
               'integer_valued', (pg_catalog.string_to_array(pg_catalog.encode(t.tgargs, 'escape'), '\000'))[7] = 't')
               ORDER BY c.attnum)
      INTO attrs
      FROM @extschema@.claimed_attributes c
      JOIN pg_catalog.pg_attribute v ON v.attrelid = c.table_name AND v.attnum = c.attnum
      JOIN pg_catalog.pg_attribute s ON s.attrelid = c.table_name AND s.attnum = c.subject_attnum
      LEFT JOIN pg_catalog.pg_trigger t ON t.tgrelid = c.table_name AND t.tgname = c.trigger_name
     WHERE c.table_name = tab AND c.enabled;
    IF attrs IS NULL THEN
        IF EXISTS (SELECT 1 FROM @extschema@.claimed_attributes c WHERE c.table_name = tab) THEN
            RAISE NOTICE 'claiming of every claimed column of table % is paused; nothing to verify', tab;
            done := true;
            RETURN;
        END IF;
        RAISE EXCEPTION 'table % has no claimed columns', tab
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Claim a column with claims_cell.claim_column first.';
    END IF;
    -- the store lists records by source type and bucket type: another
    -- table's claims of the same pair, or a paused column's of this table,
    -- would look like extra claims here
    SELECT c.table_name, v.attname, c.source_type, c.bucket_type INTO other
      FROM @extschema@.claimed_attributes c
      JOIN pg_catalog.pg_attribute v ON v.attrelid = c.table_name AND v.attnum = c.attnum
     WHERE (c.table_name <> tab OR NOT c.enabled)
       AND (c.source_type, c.bucket_type) IN
           (SELECT e->>'source_type', e->>'bucket_type' FROM pg_catalog.jsonb_array_elements(attrs) e)
     ORDER BY c.table_name = tab
     LIMIT 1;
    IF FOUND AND other.table_name <> tab THEN
        RAISE EXCEPTION 'cannot verify table %: table % claims the same bucket type % with source type %',
                tab, other.table_name, other.bucket_type, other.source_type
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'The claims store lists a cell''s records by source type; the two tables'' claims cannot be told apart.';
    ELSIF FOUND THEN
        RAISE EXCEPTION 'cannot verify table %: its paused column % claims the same bucket type % with source type % as a claimed column',
                tab, other.attname, other.bucket_type, other.source_type
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'The claims store lists a cell''s records by source type; the paused column''s claims cannot be told apart.',
                  HINT = 'Resume the column with claims_cell.set_claiming, or unclaim it.';
    END IF;

    SELECT a2.attname, a2.atttypid, pg_catalog.format_type(a2.atttypid, NULL) AS typname
      INTO keycol FROM pg_catalog.pg_attribute a2
     WHERE a2.attrelid = tab
       AND a2.attnum = (SELECT c.source_attnum FROM @extschema@.claimed_attributes c
                         WHERE c.table_name = tab AND c.enabled LIMIT 1);
    key_expr := CASE WHEN keycol.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype, 'uuid'::regtype)
                     THEN pg_catalog.format('t.%I', keycol.attname)
                     ELSE pg_catalog.format('(t.%I::pg_catalog.text COLLATE "C")', keycol.attname) END;
    sid_expr := CASE
        WHEN keycol.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype)
            THEN pg_catalog.format('pg_catalog.int8send(t.%I::pg_catalog.int8)', keycol.attname)
        WHEN keycol.atttypid = 'uuid'::regtype
            THEN pg_catalog.format('pg_catalog.uuid_send(t.%I)', keycol.attname)
        ELSE pg_catalog.format('pg_catalog.convert_to(t.%I::pg_catalog.text, %L)', keycol.attname, enc) END;

    -- recency: the table's updated_at, else commit timestamps, else none
    cutoff := pg_catalog.now() - st.verify_recent;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute u
                WHERE u.attrelid = tab AND u.attname = 'updated_at' AND NOT u.attisdropped
                  AND u.atttypid IN ('timestamptz'::regtype, 'timestamp'::regtype)) THEN
        recent_expr := pg_catalog.format('COALESCE(t.updated_at::pg_catalog.timestamptz > %L::pg_catalog.timestamptz, false)', cutoff);
    ELSIF pg_catalog.current_setting('track_commit_timestamp') = 'on' THEN
        recent_expr := pg_catalog.format('COALESCE(pg_catalog.pg_xact_commit_timestamp(t.xmin) > %L::pg_catalog.timestamptz, false)', cutoff);
    ELSE
        recent_expr := 'false';
    END IF;

    cols := pg_catalog.format('%s AS sid, t.%I::pg_catalog.text AS pk, %s AS recent', sid_expr, keycol.attname, recent_expr);
    nrows := 0;
    FOR a IN SELECT * FROM pg_catalog.jsonb_to_recordset(attrs)
                 AS x(col name, bucket_type text, subject_type text, subject_col name,
                      source_type text, integer_valued boolean)
    LOOP
        nrows := nrows + 1;
        cols := cols || pg_catalog.format(', t.%I::pg_catalog.text AS v%s, t.%I::pg_catalog.int8 AS s%s',
                                          a.col, nrows, a.subject_col, nrows);
        held_where := held_where || CASE WHEN nrows > 1 THEN ' OR ' ELSE '' END ||
            pg_catalog.format('t.%I::pg_catalog.text = ANY ($1)', a.col);
        lateral_vals := lateral_vals || CASE WHEN nrows > 1 THEN ', ' ELSE '' END ||
            pg_catalog.format('(b.v%s, b.s%s, %L, %L, %L, %L, %L::boolean)', nrows, nrows,
                              a.bucket_type, a.subject_type, a.source_type, a.col, a.integer_valued);
    END LOOP;
    -- one entry per claimable value of the rows b, as the row trigger
    -- claims it; the rows' query goes before it: 'WITH b AS (rows) ' || entries_sql
    entries_sql := 'SELECT (SELECT pg_catalog.count(*) FROM b)::integer, (SELECT b.sid FROM b ORDER BY b.sid DESC LIMIT 1),'
        ' (SELECT pg_catalog.array_agg(pg_catalog.encode(b.sid, ''hex'')) FROM b WHERE b.recent),'
        ' (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(''sid'', pg_catalog.encode(b.sid, ''hex''),'
        '   ''pk'', b.pk, ''bucket_type'', x.bt, ''value'', x.v, ''subject_type'', x.st, ''subject_id'', x.sj,'
        '   ''source_type'', x.srt, ''col'', x.col)), ''[]'')'
        '    FROM b CROSS JOIN LATERAL (VALUES ' || lateral_vals || ') AS x(v, sj, bt, st, srt, col, iv)'
        '   WHERE x.v IS NOT NULL AND pg_catalog.btrim(x.v, E'' \t\n\r\f\v'') <> '''''
        '     AND pg_catalog.char_length(x.v) <= 1024 AND pg_catalog.octet_length(b.sid) <= 128'
        '     AND (NOT x.iv OR CASE WHEN x.v ~ ''^(0|-?[1-9][0-9]{0,18})$'''
        '                           THEN x.v::pg_catalog.numeric BETWEEN -9223372036854775808 AND 9223372036854775807'
        '                           ELSE false END)'
        '     AND x.sj IS NOT NULL AND x.sj <> 0)';

    LOOP
        -- the next 1000 source ids after lo, in the store's order: hi, the
        -- end of this batch's range (NULL for the last batch: open above)
        IF keycol.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype) THEN
            -- big-endian two's complement: the non-negative keys, then the negative ones
            lo_int := CASE WHEN lo IS NULL THEN NULL
                           ELSE ('x' || pg_catalog.encode(lo, 'hex'))::bit(64)::bigint END;
            IF lo_int IS NULL OR lo_int >= 0 THEN
                rows_sql := pg_catalog.format(
                    '(SELECT %1$s AS sid FROM %2$s t WHERE t.%3$I >= 0 %4$s ORDER BY t.%3$I LIMIT 1000)'
                    ' UNION ALL (SELECT %1$s FROM %2$s t WHERE t.%3$I < 0 ORDER BY t.%3$I LIMIT 1000)'
                    ' ORDER BY 1 LIMIT 1000',
                    sid_expr, tab, keycol.attname,
                    CASE WHEN lo_int IS NULL THEN '' ELSE pg_catalog.format('AND t.%I > %s', keycol.attname, lo_int) END);
            ELSE
                rows_sql := pg_catalog.format(
                    'SELECT %1$s AS sid FROM %2$s t WHERE t.%3$I < 0 AND t.%3$I > %4$s ORDER BY t.%3$I LIMIT 1000',
                    sid_expr, tab, keycol.attname, lo_int);
            END IF;
        ELSE
            -- a key longer than the store's 128 bytes is never claimed (the
            -- trigger refuses it) and cannot bound a listing: skipped
            rows_sql := pg_catalog.format('SELECT %1$s AS sid FROM %2$s t WHERE %4$s AND pg_catalog.octet_length(%1$s) <= 128 ORDER BY %3$s LIMIT 1000',
                sid_expr, tab, key_expr, @extschema@.verify_range(key_expr, keycol.atttypid, enc, lo, NULL));
        END IF;
        EXECUTE 'SELECT pg_catalog.count(*)::integer, (pg_catalog.array_agg(b.sid ORDER BY b.sid DESC))[1]'
                ' FROM (' || rows_sql || ') b'
           INTO nrows, maxsid;
        hi := CASE WHEN nrows >= 1000 THEN maxsid END;

        -- the store's records of the same source id range
        stored := @extschema@.verify_list_store(cfg.server_name, cfg.cell_id, attrs, lo, hi);

        -- the rows of the range, read after the store's records
        EXECUTE 'WITH b AS (' ||
                    pg_catalog.format('SELECT %s FROM %s t WHERE %s', cols, tab,
                                      @extschema@.verify_range(key_expr, keycol.atttypid, enc, lo, hi)) || ') ' || entries_sql
           INTO fresh_n, fresh_max, recent_sids, expected;

        -- compare: one row per value on either side. A difference stands
        -- only if a second listing, taken after the rows were read, shows
        -- the store's record unchanged: a change that committed here before
        -- the read had its lease at the store before it, so it shows in
        -- one of the two listings as leased or as a changed record
        stored2 := stored;
        FOR pass IN 1 .. 2 LOOP
            WITH e AS (
                SELECT * FROM pg_catalog.jsonb_to_recordset(expected)
                    AS x(sid text, pk text, bucket_type text, value text, subject_type text,
                         subject_id bigint, source_type text, col text)),
            r1 AS (
                SELECT x->'metadata'->'bucket'->>'type' AS bucket_type,
                       x->'metadata'->'bucket'->>'value' AS value, x AS rec
                  FROM pg_catalog.jsonb_array_elements(stored) x),
            r2 AS (
                SELECT x->'metadata'->'bucket'->>'type' AS bucket_type,
                       x->'metadata'->'bucket'->>'value' AS value, x AS rec
                  FROM pg_catalog.jsonb_array_elements(stored2) x),
            r AS (
                SELECT COALESCE(r1.bucket_type, r2.bucket_type) AS bucket_type,
                       COALESCE(r1.value, r2.value) AS value,
                       r1.rec IS DISTINCT FROM r2.rec AS changed,
                       pg_catalog.encode(pg_catalog.decode(COALESCE(r1.rec, r2.rec)->'metadata'->'source'->>'rails_primary_key_id', 'base64'), 'hex') AS sid,
                       COALESCE(r1.rec, r2.rec)->'metadata'->'subject'->>'type' AS subject_type,
                       COALESCE(r1.rec, r2.rec)->'metadata'->'subject'->>'id' AS subject_id,
                       COALESCE(r1.rec, r2.rec)->'metadata'->'source'->>'type' AS source_type,
                       COALESCE(r1.rec, r2.rec)->>'status' AS status,
                       (COALESCE(r1.rec, r2.rec)->>'updated_at')::timestamptz AS updated_at
                  FROM r1 FULL JOIN r2 ON r1.bucket_type = r2.bucket_type AND r1.value = r2.value),
            j AS (
                SELECT e.sid AS e_sid, e.pk, e.col, e.bucket_type AS e_bucket, e.value AS e_value,
                       e.subject_type AS e_subject_type, e.subject_id AS e_subject_id,
                       e.source_type AS e_source_type,
                       r.bucket_type AS r_bucket, r.value AS r_value,
                       CASE
                         WHEN e.sid = ANY (recent_sids) OR r.sid = ANY (recent_sids) OR r.changed
                              OR r.status <> 'ACTIVE' OR r.updated_at > cutoff THEN 'recent'
                         WHEN e.value IS NULL THEN 'extra'
                         WHEN pg_catalog.count(e.sid) OVER (PARTITION BY e.bucket_type, e.value) > 1 THEN 'duplicate'
                         WHEN r.value IS NULL AND (e.bucket_type || ':' || e.value) = ANY (moved) THEN 'moved'
                         WHEN r.value IS NULL THEN 'missing'
                         WHEN e.sid = r.sid AND e.subject_type = r.subject_type
                              AND e.subject_id::text = r.subject_id AND e.source_type = r.source_type THEN 'ok'
                         ELSE 'drifted' END AS kind
                  FROM e FULL JOIN r ON e.bucket_type = r.bucket_type AND e.value = r.value)
            SELECT pg_catalog.count(*) FILTER (WHERE kind = 'duplicate') AS n_duplicate,
                   pg_catalog.count(*) FILTER (WHERE kind IN ('missing', 'extra', 'drifted')) AS n_fixes,
                   pg_catalog.count(*) FILTER (WHERE kind = 'recent') AS n_recent,
                   pg_catalog.string_agg(pg_catalog.format('%s=%s (rows %s)', e_bucket, e_value, pk), ', ')
                       FILTER (WHERE kind = 'duplicate') AS duplicates,
                   COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                       'kind', kind, 'pk', pk, 'col', col, 'sid', e_sid,
                       'bucket_type', COALESCE(e_bucket, r_bucket), 'value', COALESCE(e_value, r_value),
                       'subject_type', e_subject_type, 'subject_id', e_subject_id, 'source_type', e_source_type))
                       FILTER (WHERE kind IN ('missing', 'extra', 'drifted')), '[]') AS fixes
              INTO cls FROM j;
            EXIT WHEN pass = 2 OR cls.n_fixes + cls.n_duplicate = 0;
            stored2 := @extschema@.verify_list_store(cfg.server_name, cfg.cell_id, attrs, lo, hi);
            -- the same listing again: the second comparison would repeat the first
            EXIT WHEN stored2 = stored;
        END LOOP;
        skipped_recent := skipped_recent + cls.n_recent;
        IF cls.duplicates IS NOT NULL THEN
            RAISE WARNING 'claims_cell: table % holds the same claimed value in more than one row: %',
                tab, cls.duplicates
                USING DETAIL = 'Rows written without the claims_cell triggers; such values are not repaired.';
        END IF;

        -- an extra value that a row of another batch holds was moved there
        -- with the triggers off: drifted, replaced, never destroyed (its
        -- row's batch then skips it as moved)
        fixes := cls.fixes;
        IF fixes @? '$[*] ? (@.kind == "extra")' THEN
            EXECUTE 'WITH b AS (' || pg_catalog.format('SELECT %s FROM %s t WHERE %s', cols, tab, held_where)
                    || ') ' || entries_sql
               INTO fresh_n, fresh_max, fresh_recent, fresh
              USING (SELECT pg_catalog.array_agg(f->>'value') FROM pg_catalog.jsonb_array_elements(fixes) f
                      WHERE f->>'kind' = 'extra');
            WITH h AS (
                SELECT x->>'bucket_type' AS bucket_type, x->>'value' AS value,
                       (pg_catalog.array_agg(x))[1] || '{"kind": "drifted"}' AS fix,
                       pg_catalog.count(*) AS n,
                       pg_catalog.bool_or(x->>'sid' = ANY (COALESCE(fresh_recent, '{}'))) AS recent
                  FROM pg_catalog.jsonb_array_elements(fresh) x GROUP BY 1, 2)
            SELECT COALESCE(pg_catalog.jsonb_agg(COALESCE(h.fix, f.x) ORDER BY f.i)
                                FILTER (WHERE h.n IS NULL OR (h.n = 1 AND NOT h.recent)), '[]'),
                   pg_catalog.count(*) FILTER (WHERE h.recent),
                   pg_catalog.count(*) FILTER (WHERE h.n > 1 AND NOT h.recent),
                   moved || COALESCE(pg_catalog.array_agg(h.bucket_type || ':' || h.value)
                                         FILTER (WHERE h.n IS NOT NULL), '{}')
              INTO fixes, nrows, fresh_n, moved
              FROM pg_catalog.jsonb_array_elements(fixes) WITH ORDINALITY AS f(x, i)
              LEFT JOIN h ON f.x->>'kind' = 'extra' AND h.bucket_type = f.x->>'bucket_type'
                         AND h.value = f.x->>'value';
            skipped_recent := skipped_recent + nrows;
            IF fresh_n > 0 THEN
                missing := missing + fresh_n;
                RAISE WARNING 'claims_cell: table % holds % claimed values in more than one row', tab, fresh_n
                    USING DETAIL = 'Rows written without the claims_cell triggers; such values are not repaired.';
            END IF;
        END IF;

        -- re-read the rows of the differences, after the second listing
        -- (with repair locked until this transaction ends): a row changed
        -- since the batch was read is left for the next run
        IF fixes @? '$[*] ? (@.kind != "extra")' THEN
            EXECUTE 'WITH b AS (' ||
                pg_catalog.format('SELECT %s FROM %s t WHERE t.%I = ANY ($1::%s[])%s',
                                  cols, tab, keycol.attname, keycol.typname,
                                  CASE WHEN repair THEN ' FOR SHARE OF t' ELSE '' END) || ') ' || entries_sql
               INTO fresh_n, fresh_max, fresh_recent, fresh
              USING (SELECT pg_catalog.array_agg(f->>'pk') FROM pg_catalog.jsonb_array_elements(fixes) f
                      WHERE f->>'kind' <> 'extra');
            WITH n AS (
                SELECT DISTINCT x->>'sid' AS sid, x->>'bucket_type' AS bucket_type,
                       x->>'value' AS value, x->>'subject_id' AS subject_id
                  FROM pg_catalog.jsonb_array_elements(fresh) x
                 WHERE NOT (x->>'sid' = ANY (COALESCE(fresh_recent, '{}'))))
            SELECT COALESCE(pg_catalog.jsonb_agg(f.x ORDER BY f.i) FILTER (WHERE f.x->>'kind' = 'extra' OR n.sid IS NOT NULL), '[]'),
                   pg_catalog.count(*) FILTER (WHERE f.x->>'kind' <> 'extra' AND n.sid IS NULL)
              INTO fixes, nrows
              FROM pg_catalog.jsonb_array_elements(fixes) WITH ORDINALITY AS f(x, i)
              LEFT JOIN n ON f.x->>'kind' <> 'extra' AND n.sid = f.x->>'sid'
                         AND n.bucket_type = f.x->>'bucket_type' AND n.value = f.x->>'value'
                         AND n.subject_id = f.x->>'subject_id';
            skipped_recent := skipped_recent + nrows;
        END IF;
        SELECT missing + cls.n_duplicate + pg_catalog.count(*) FILTER (WHERE f->>'kind' = 'missing'),
               extra + pg_catalog.count(*) FILTER (WHERE f->>'kind' = 'extra'),
               drifted + pg_catalog.count(*) FILTER (WHERE f->>'kind' = 'drifted')
          INTO missing, extra, drifted
          FROM pg_catalog.jsonb_array_elements(fixes) f;
        IF repair AND pg_catalog.jsonb_array_length(fixes) > 0 THEN
            repaired := repaired + @extschema@.verify_repair(cfg.server_name, cfg.cell_id, tab, fixes, chunk_limit);
        END IF;

        last_source_id := COALESCE(hi, maxsid, lo);
        IF hi IS NULL THEN
            done := true;
            RETURN;
        END IF;
        lo := hi;
        EXIT WHEN deadline IS NOT NULL AND pg_catalog.clock_timestamp() >= deadline;
    END LOOP;
END
$$;

-- One lease of repairs: source_id_text() written out, as a function with
-- its own search_path is never inlined and cost a call (and a search_path
-- change) per record.
CREATE OR REPLACE FUNCTION @extschema@.verify_repair_lease(server name, cell_id bigint, items jsonb,
                                                OUT lease uuid, OUT sqlstate text, OUT message text)
RETURNS record
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT r.lease, r.sqlstate, r.message
  FROM (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                   'bucket', pg_catalog.jsonb_build_object('type', x->>'bucket_type', 'value', x->>'value'),
                   'subject', pg_catalog.jsonb_build_object('type', x->>'subject_type', 'id', x->>'subject_id'),
                   'source', pg_catalog.jsonb_build_object('type', x->>'source_type',
                       'rails_primary_key_id', pg_catalog.translate(pg_catalog.encode(pg_catalog.decode(x->>'sid', 'hex'), 'base64'), E'\n', ''))))
                   FILTER (WHERE x->>'kind' <> 'extra'), '[]') AS creates,
               COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                   'bucket', pg_catalog.jsonb_build_object('type', x->>'bucket_type', 'value', x->>'value')))
                   FILTER (WHERE x->>'kind' <> 'missing'), '[]') AS destroys
          FROM pg_catalog.jsonb_array_elements(items) x) q,
       LATERAL @extschema@.store_repair_lease(server, cell_id, q.creates, q.destroys) r
$$;
