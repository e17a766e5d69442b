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
