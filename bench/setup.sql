-- setup.sql: helpers the benchmark creates in each benchmark database
-- (after CREATE EXTENSION claims). Run by bench/run.sh as the superuser,
-- after it created the login roles bench_cell and bench_router. Nothing
-- here is part of the extension.

-- The cells the benchmark uses (calls for an unregistered cell are
-- refused), all bound to bench_cell: the scenario clients connect as that
-- role, so each call passes the cell check as a cell's would (not as a
-- superuser's). Routing lookups connect as bench_router, a member of
-- claims_router. The floors connect as the superuser.
CREATE FUNCTION bench_register_cells(cells bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    c bigint;
BEGIN
    SET LOCAL client_min_messages = warning;
    FOREACH c IN ARRAY cells LOOP
        PERFORM claims_register_cell(c, 'bench-cell-' || c, 'bench_cell', 'benchmark');
    END LOOP;
END
$$;

-- Bulk load of claimed values straight into the table (no API, no
-- leases): USERNAMES 'lk_<i>' for i in [lo, hi], ACTIVE, owned by cells
-- 100..149, source RAILS_TABLE_USERS with the 8-byte big-endian id i.
-- Identifiers are time-ordered-looking UUIDs below any the extension makes.
CREATE FUNCTION bench_bulk_claims(lo bigint, hi bigint) RETURNS bigint
LANGUAGE sql AS $$
    WITH ins AS (
        INSERT INTO claims (uuid, bucket_type, bucket_value, bucket_digest,
                            subject_type, subject_id, source_type, source_id,
                            creator_id, lease_uuid, status)
        SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid,
               4, 'lk_' || i, sha256(convert_to('lk_' || i, 'UTF8')),
               4, i, 1, int8send(i),
               100 + i % 50, NULL, 'ACTIVE'
        FROM generate_series(lo, hi) AS i
        RETURNING 1
    )
    SELECT count(*) FROM ins
$$;

-- Values the rename scenario destroys first: for each client c in
-- [0, clients), USERNAMES 'rn<run>-<c>-<k>' for k in (-pool, 0], ACTIVE,
-- owned by cell c + 1 (the client's cell). Transaction n of client c
-- destroys 'rn<run>-<c>-<n - pool>' and creates 'rn<run>-<c>-<n>'.
CREATE FUNCTION bench_preload_rename(run bigint, clients int, pool int) RETURNS bigint
LANGUAGE sql AS $$
    WITH ins AS (
        INSERT INTO claims (uuid, bucket_type, bucket_value, bucket_digest,
                            subject_type, subject_id, source_type, source_id,
                            creator_id, lease_uuid, status)
        SELECT gen_random_uuid(), 4, v, sha256(convert_to(v, 'UTF8')),
               4, 1 + c, 1, int8send(1 + c::bigint), c + 1, NULL, 'ACTIVE'
        FROM generate_series(0, clients - 1) AS c,
             generate_series(1 - pool, 0) AS k,
             LATERAL (SELECT 'rn' || run || '-' || c || '-' || k AS v) AS x
        RETURNING 1
    )
    SELECT count(*) FROM ins
$$;

-- A cell's verification data, written through the API: users 1..users,
-- each with USER_IDS, USERNAMES and EMAILS claims of source
-- RAILS_TABLE_USERS (three records per source id), 333 users per lease.
CREATE PROCEDURE bench_load_scan_cell(cell bigint, users int)
LANGUAGE plpgsql AS $$
DECLARE
    lo int := 1;
    hi int;
    req text;
    lease uuid;
BEGIN
    WHILE lo <= users LOOP
        hi := least(lo + 332, users);
        SELECT '{"cell_id":' || cell || ',"create_records":[' || string_agg(
                   '{"bucket":{"type":"USER_IDS","value":"' || (cell * 10000000 + u) || '"},'
                   '"subject":{"type":"USER","id":' || u || '},'
                   '"source":{"type":"RAILS_TABLE_USERS","rails_primary_key_id":' || u || '}},'
                   '{"bucket":{"type":"USERNAMES","value":"scan' || cell || '-' || u || '"},'
                   '"subject":{"type":"USER","id":' || u || '},'
                   '"source":{"type":"RAILS_TABLE_USERS","rails_primary_key_id":' || u || '}},'
                   '{"bucket":{"type":"EMAILS","value":"scan' || cell || '-' || u || '@example.com"},'
                   '"subject":{"type":"USER","id":' || u || '},'
                   '"source":{"type":"RAILS_TABLE_USERS","rails_primary_key_id":' || u || '}}',
                   ',') || ']}'
          INTO req
          FROM generate_series(lo, hi) AS u;
        lease := (claims_begin_update(req::jsonb) ->> 'lease_uuid')::uuid;
        PERFORM claims_commit(cell, lease);
        COMMIT;
        lo := hi + 1;
    END LOOP;
END
$$;

-- A cell with n outstanding leases (one ROUTES create each), written
-- through the API, one transaction per lease so created_at differs (the
-- caller sets synchronous_commit = off for the load).
CREATE PROCEDURE bench_load_leases(cell bigint, n int)
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..n LOOP
        PERFORM claims_begin_update(('{"cell_id":' || cell || ',"create_records":[{"bucket":'
            '{"type":"ROUTES","value":"pending' || cell || '/' || i || '"},'
            '"subject":{"type":"PROJECT","id":' || i || '},'
            '"source":{"type":"RAILS_TABLE_ROUTES","rails_primary_key_id":' || i || '}}]}')::jsonb);
        COMMIT;
    END LOOP;
END
$$;

-- One full sweep of claims_list_records over a cell, as the scan script
-- pages: the number of pages and of records.
CREATE FUNCTION bench_sweep_records(cell bigint, page int, OUT pages int, OUT records bigint)
LANGUAGE plpgsql AS $$
DECLARE
    last text := 'AA==';
    r jsonb;
BEGIN
    pages := 0;
    records := 0;
    LOOP
        r := claims_list_records(('{"cell_id":' || cell || ',"source_type":"RAILS_TABLE_USERS",'
                                  '"source_id_gt":"' || last || '","limit":' || page || '}')::jsonb);
        pages := pages + 1;
        records := records + jsonb_array_length(r -> 'records');
        EXIT WHEN NOT (r ->> 'truncated')::boolean;
        last := r -> 'records' -> -1 -> 'metadata' -> 'source' ->> 'rails_primary_key_id';
    END LOOP;
END
$$;

-- One full sweep of claims_list_leases over a cell: pages and leases.
CREATE FUNCTION bench_sweep_leases(cell bigint, page int, OUT pages int, OUT leases bigint)
LANGUAGE plpgsql AS $$
DECLARE
    next text := '';
    r jsonb;
BEGIN
    pages := 0;
    leases := 0;
    LOOP
        r := claims_list_leases(('{"cell_id":' || cell || ',"limit":' || page || next || '}')::jsonb);
        pages := pages + 1;
        leases := leases + jsonb_array_length(r -> 'leases');
        EXIT WHEN r -> 'next' IS NULL;
        next := ',"next":"' || (r -> 'next' ->> 'value') || '"';
    END LOOP;
END
$$;

-- Contention: outcome counters (one row per client, operation and
-- SQLSTATE, so clients never update the same row) and each client's
-- outstanding leases.
CREATE UNLOGGED TABLE bench_outcome (
    client   int NOT NULL,
    op       text NOT NULL,
    sqlstate text NOT NULL,
    n        bigint NOT NULL,
    PRIMARY KEY (client, op, sqlstate)
);

CREATE UNLOGGED TABLE bench_client_lease (
    client        int PRIMARY KEY,
    cell          bigint NOT NULL,
    leases        uuid[] NOT NULL DEFAULT '{}',  -- outstanding, oldest first
    finished      uuid,                          -- last lease it finished
    finished_how  text                           -- 'commit' or 'rollback'
);

GRANT SELECT, INSERT, UPDATE ON bench_outcome, bench_client_lease TO bench_cell;

-- A hot value: USERNAMES 'hot-<k>', k in [0, nhot).
CREATE FUNCTION bench_hot_record(k int, create_it boolean) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN create_it THEN
        '{"bucket":{"type":"USERNAMES","value":"hot-' || k || '"},'
        '"subject":{"type":"USER","id":' || (k + 1) || '},'
        '"source":{"type":"RAILS_TABLE_USERS","rails_primary_key_id":' || (k + 1) || '}}'
    ELSE
        '{"bucket":{"type":"USERNAMES","value":"hot-' || k || '"}}'
    END
$$;

-- One random operation of a client on the hot values. A client holds up
-- to three outstanding leases: with three it finishes the oldest, with one
-- or two it finishes the oldest half of the time (commit 60%, roll back
-- 40%), otherwise it begins a new lease of 1-4 distinct random values
-- (creates 45%, destroys 30%, both 20%, replaces 5%); now and then (2%) it
-- finishes its last finished lease the other way (55000). Every error is
-- caught and its SQLSTATE ('00000' for success) counted in bench_outcome.
CREATE FUNCTION bench_contend(p_client int, p_cell bigint, p_nhot int) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    me bench_client_lease;
    v_op text;
    st text := '00000';
    r float8 := random();
    r2 float8 := random();
    nvals int;
    ks int[];
    creates text[] := '{}';
    destroys text[] := '{}';
    req text;
    res jsonb;
BEGIN
    SELECT * INTO me FROM bench_client_lease WHERE client = p_client;
    IF NOT FOUND THEN
        INSERT INTO bench_client_lease (client, cell) VALUES (p_client, p_cell)
        RETURNING * INTO me;
    END IF;

    IF me.finished IS NOT NULL AND r < 0.02 THEN
        v_op := CASE WHEN me.finished_how = 'commit' THEN 'late_rollback' ELSE 'late_commit' END;
    ELSIF cardinality(me.leases) >= 3 OR (cardinality(me.leases) > 0 AND r < 0.5) THEN
        v_op := CASE WHEN r2 < 0.6 THEN 'commit' ELSE 'rollback' END;
    ELSE
        v_op := CASE WHEN r2 < 0.45 THEN 'begin_create'
                     WHEN r2 < 0.75 THEN 'begin_destroy'
                     WHEN r2 < 0.95 THEN 'begin_mixed'
                     ELSE 'begin_replace' END;
    END IF;

    BEGIN
        IF v_op IN ('commit', 'late_commit') THEN
            PERFORM claims_commit(p_cell, CASE WHEN v_op = 'commit' THEN me.leases[1] ELSE me.finished END);
        ELSIF v_op IN ('rollback', 'late_rollback') THEN
            PERFORM claims_rollback(p_cell, CASE WHEN v_op = 'rollback' THEN me.leases[1] ELSE me.finished END);
        ELSE
            nvals := 1 + floor(random() * 4)::int;
            SELECT array_agg(k) INTO ks
              FROM (SELECT DISTINCT floor(random() * p_nhot)::int AS k
                      FROM generate_series(1, nvals)) AS x;
            FOR i IN 1..cardinality(ks) LOOP
                IF v_op = 'begin_create' OR (v_op = 'begin_mixed' AND i % 2 = 1) THEN
                    creates := creates || bench_hot_record(ks[i], true);
                ELSIF v_op = 'begin_replace' THEN
                    creates := creates || bench_hot_record(ks[i], true);
                    destroys := destroys || bench_hot_record(ks[i], false);
                ELSE
                    destroys := destroys || bench_hot_record(ks[i], false);
                END IF;
            END LOOP;
            req := '{"cell_id":' || p_cell
                || ',"create_records":[' || array_to_string(creates, ',') || ']'
                || ',"destroy_records":[' || array_to_string(destroys, ',') || ']}';
            res := claims_begin_update(req::jsonb);
        END IF;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE;
    END;

    IF st = '00000' THEN
        IF v_op IN ('commit', 'rollback') THEN
            UPDATE bench_client_lease
               SET finished = leases[1], finished_how = v_op, leases = leases[2:]
             WHERE client = p_client;
        ELSIF v_op LIKE 'begin%' THEN
            UPDATE bench_client_lease
               SET leases = leases || (res ->> 'lease_uuid')::uuid
             WHERE client = p_client;
        END IF;
    END IF;

    INSERT INTO bench_outcome AS o VALUES (p_client, v_op, st, 1)
        ON CONFLICT (client, op, sqlstate) DO UPDATE SET n = o.n + 1;
    RETURN st;
END
$$;

-- The signup's reference in plain PL/pgSQL: the same lease protocol over
-- the store's own tables (no history, no role check, no statistics), as
-- an application would write it without the extension. Begin reads the
-- records of a create-only request, resolves the type names through the
-- registries, hashes the values, and inserts the lease and its
-- LEASE_CREATING claims in (bucket type, digest) order; a value already
-- claimed fails the unique index (23505). Commit marks the lease committed
-- and its claims ACTIVE, or fails when the lease is not the cell's
-- outstanding lease (P0002).
CREATE FUNCTION bench_pl_begin_update(request jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    cell bigint := (request ->> 'cell_id')::bigint;
    lease uuid := gen_random_uuid();
    n int;
    known int;
    types int[];
    digests bytea[];
    vals text[];
    stypes int[];
    sids bigint[];
    srcts int[];
    srcids bytea[];
BEGIN
    IF cell IS NULL OR cell <= 0 THEN
        RAISE EXCEPTION 'invalid request at $.cell_id' USING ERRCODE = '22023';
    END IF;
    SELECT count(*), count(bt.type_id) FILTER (WHERE st.type_id IS NOT NULL AND so.type_id IS NOT NULL
                                               AND r.val <> ''),
           array_agg(bt.type_id ORDER BY bt.type_id, r.d), array_agg(r.d ORDER BY bt.type_id, r.d),
           array_agg(r.val ORDER BY bt.type_id, r.d), array_agg(st.type_id ORDER BY bt.type_id, r.d),
           array_agg(r.sid ORDER BY bt.type_id, r.d), array_agg(so.type_id ORDER BY bt.type_id, r.d),
           array_agg(int8send(r.srcid) ORDER BY bt.type_id, r.d)
      INTO n, known, types, digests, vals, stypes, sids, srcts, srcids
      FROM (SELECT e -> 'bucket' ->> 'type' AS btype, e -> 'bucket' ->> 'value' AS val,
                   sha256(convert_to(e -> 'bucket' ->> 'value', 'UTF8')) AS d,
                   e -> 'subject' ->> 'type' AS stype, (e -> 'subject' ->> 'id')::bigint AS sid,
                   e -> 'source' ->> 'type' AS srct,
                   (e -> 'source' ->> 'rails_primary_key_id')::bigint AS srcid
              FROM jsonb_array_elements(request -> 'create_records') AS e) AS r
      LEFT JOIN claim_bucket_types bt ON bt.name = r.btype
      LEFT JOIN claim_subject_types st ON st.name = r.stype
      LEFT JOIN claim_source_types so ON so.name = r.srct;
    IF n = 0 OR known <> n THEN
        RAISE EXCEPTION 'invalid request at $.create_records' USING ERRCODE = '22023';
    END IF;
    INSERT INTO claim_leases (uuid, creator_id, payload, claim_types, claim_digests, creates_only)
    VALUES (lease, cell, request, types, digests, true);
    INSERT INTO claims (uuid, bucket_type, bucket_value, bucket_digest, subject_type, subject_id,
                        source_type, source_id, creator_id, lease_uuid, status)
    SELECT gen_random_uuid(), k.t, k.v, k.d, k.st, k.sid, k.so, k.srcid, cell, lease, 'LEASE_CREATING'
      FROM unnest(types, vals, digests, stypes, sids, srcts, srcids) WITH ORDINALITY
           AS k(t, v, d, st, sid, so, srcid, i)
     ORDER BY k.i;
    RETURN jsonb_build_object('cell_id', cell::text, 'lease_uuid', lease);
END
$$;

CREATE FUNCTION bench_pl_commit(cell bigint, lease uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    types int[];
    digests bytea[];
BEGIN
    UPDATE claim_leases SET state = 'committed', updated_at = now(), finished_at = now()
     WHERE uuid = lease AND creator_id = cell AND state = 'outstanding'
    RETURNING claim_types, claim_digests INTO types, digests;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lease % is not an outstanding lease of cell %', lease, cell USING ERRCODE = 'P0002';
    END IF;
    UPDATE claims c SET status = 'ACTIVE', lease_uuid = NULL, updated_at = now()
      FROM unnest(types, digests) AS k(t, d)
     WHERE c.bucket_type = k.t AND c.bucket_digest = k.d AND c.lease_uuid = lease;
END
$$;
