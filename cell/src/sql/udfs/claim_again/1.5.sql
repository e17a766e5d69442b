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
CREATE OR REPLACE FUNCTION @extschema@.claim_again(server name, cell_id bigint, requests jsonb,
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
            FOR a IN SELECT c.table_name, c.attnum, c.subject_attnum,
                            COALESCE(c.source_attnums, ARRAY[c.source_attnum]) AS source_attnums, c.subject_type,
                            c.source_type, c.enabled
                       FROM @extschema@.claimed_attributes c
                      WHERE c.bucket_type OPERATOR(pg_catalog.=) v.btype
            LOOP
                FOR h IN SELECT * FROM @extschema@.rows_holding(a.table_name, a.attnum, v.value,
                                                                a.subject_attnum, a.source_attnums)
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
