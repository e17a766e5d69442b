--
-- list_leases: a cell's outstanding leases in creation order, keyset-paged
-- with an opaque "next" token that is absent on the last page.
--
\set SHOW_CONTEXT never

-- scan_leases(cell, limit [, created_after]): follow "next" until it is
-- absent; one row per lease returned, with its page number and position.
CREATE FUNCTION scan_leases(cell bigint, page_limit int, after text DEFAULT NULL)
RETURNS TABLE (page int, n int, lease uuid)
LANGUAGE plpgsql AS $$
DECLARE
    request jsonb := jsonb_build_object('cell_id', cell, 'limit', page_limit);
    answer jsonb;
BEGIN
    IF after IS NOT NULL THEN
        request := request || jsonb_build_object('created_after', after);
    END IF;
    page := 0;
    n := 0;
    LOOP
        page := page + 1;
        answer := claims_list_leases(request);
        FOR lease IN SELECT (e ->> 'uuid')::uuid FROM jsonb_array_elements(answer -> 'leases') AS e LOOP
            n := n + 1;
            RETURN NEXT;
        END LOOP;
        EXIT WHEN NOT answer ? 'next';
        request := request || jsonb_build_object('next', answer -> 'next');
        IF page > 10000 THEN
            RAISE EXCEPTION 'scan does not end';
        END IF;
    END LOOP;
END
$$;

-- rfc3339(ts): a timestamp as a request spells it.
CREATE FUNCTION rfc3339(ts timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- A cell with no leases.
SELECT claims_list_leases('{"cell_id": 700}') AS empty;

-- Cell 701: five outstanding leases, one committed and one rolled back;
-- cell 702 has one of its own.
SELECT claims_begin_update(req(701, jsonb_build_array(rec('ROUTES', 'll/1')))) ->> 'lease_uuid' AS l1 \gset
SELECT claims_begin_update(req(701, jsonb_build_array(rec('ROUTES', 'll/2')))) ->> 'lease_uuid' AS l2 \gset
SELECT claims_begin_update(req(701, jsonb_build_array(rec('ROUTES', 'll/done')))) ->> 'lease_uuid' AS ldone \gset
SELECT claims_begin_update(req(701, jsonb_build_array(rec('ROUTES', 'll/3')))) ->> 'lease_uuid' AS l3 \gset
SELECT claims_begin_update(req(701, jsonb_build_array(rec('ROUTES', 'll/undone')))) ->> 'lease_uuid' AS lundone \gset
SELECT claims_begin_update(req(701, jsonb_build_array(rec('ROUTES', 'll/4')))) ->> 'lease_uuid' AS l4 \gset
SELECT claims_begin_update(req(701, jsonb_build_array(rec('ROUTES', 'll/5')))) ->> 'lease_uuid' AS l5 \gset
SELECT claims_begin_update(req(702, jsonb_build_array(rec('ROUTES', 'll/other')))) ->> 'lease_uuid' AS lother \gset
SELECT claims_commit(701, :'ldone');
SELECT claims_rollback(701, :'lundone');

-- The answer: {"leases": [{uuid, created_at, updated_at}...]} with no "next"
-- when everything fits; only cell 701's outstanding leases, oldest first.
SELECT scrub(claims_list_leases('{"cell_id": 701}')) AS answer;
SELECT array_agg(CASE e ->> 'uuid' WHEN :'l1' THEN 'l1' WHEN :'l2' THEN 'l2' WHEN :'l3' THEN 'l3'
                                    WHEN :'l4' THEN 'l4' WHEN :'l5' THEN 'l5' ELSE e ->> 'uuid' END ORDER BY i) AS leases
FROM jsonb_array_elements(claims_list_leases('{"cell_id": 701}') -> 'leases') WITH ORDINALITY AS a(e, i);
-- Each entry's timestamps are the lease's, in UTC with a Z.
SELECT bool_and((e ->> 'created_at')::timestamptz = l.created_at) AS created_matches,
       bool_and((e ->> 'updated_at')::timestamptz = l.updated_at) AS updated_matches,
       bool_and(e ->> 'created_at' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6})?Z$') AS utc_z
FROM jsonb_array_elements(claims_list_leases('{"cell_id": 701}') -> 'leases') AS e
JOIN claim_leases l ON l.uuid = (e ->> 'uuid')::uuid;

-- A page: "next" is a google.protobuf.Any holding a BytesValue.
SELECT scrub(claims_list_leases('{"cell_id": 701, "limit": 2}')) AS page;
SELECT claims_list_leases('{"cell_id": 701, "limit": 2}') AS p1 \gset
SELECT (:'p1'::jsonb #>> '{leases,0,uuid}') = :'l1' AS first_is_l1, (:'p1'::jsonb #>> '{leases,1,uuid}') = :'l2' AS second_is_l2,
       :'p1'::jsonb #>> '{next,@type}' AS token_type;

-- Between pages the table changes: the lease the token points at and one
-- already returned finish, one not yet returned finishes, a new one starts.
-- Leases outstanding throughout (l4, l5) come exactly once; finished ones
-- that were not yet returned never; the new one at the end.
SELECT claims_commit(701, :'l2');
SELECT claims_rollback(701, :'l1');
SELECT claims_commit(701, :'l3');
SELECT claims_begin_update(req(701, jsonb_build_array(rec('ROUTES', 'll/6')))) ->> 'lease_uuid' AS l6 \gset
SELECT claims_list_leases(jsonb_build_object('cell_id', 701, 'limit', 2, 'next', :'p1'::jsonb -> 'next')) AS p2 \gset
SELECT (:'p2'::jsonb #>> '{leases,0,uuid}') = :'l4' AS first_is_l4, (:'p2'::jsonb #>> '{leases,1,uuid}') = :'l5' AS second_is_l5,
       jsonb_array_length(:'p2'::jsonb -> 'leases') AS n, :'p2'::jsonb ? 'next' AS has_next;
-- The bare token value works as well as the wrapped one.
SELECT claims_list_leases(jsonb_build_object('cell_id', 701, 'limit', 2, 'next', :'p2'::jsonb #> '{next,value}')) AS p3 \gset
SELECT (:'p3'::jsonb #>> '{leases,0,uuid}') = :'l6' AS only_l6, jsonb_array_length(:'p3'::jsonb -> 'leases') AS n,
       :'p3'::jsonb ? 'next' AS has_next;
SELECT claims_list_leases(jsonb_build_object('cell_id', 701, 'limit', 2, 'next', :'p2'::jsonb -> 'next')) = :'p3'::jsonb AS same_page;
-- Scans to the end with any page size return every outstanding lease once,
-- in (created_at, uuid) order.
SELECT claims_begin_update(req(701, jsonb_build_array(rec('ROUTES', 'll/' || i)))) ->> 'cell_id' AS cell
FROM generate_series(7, 12) AS i;
SELECT array_agg(uuid ORDER BY created_at, uuid) AS expected FROM claim_leases
WHERE creator_id = 701 AND state = 'outstanding' \gset
SELECT l.page_limit, count(*) AS leases, max(s.page) AS pages,
       array_agg(s.lease ORDER BY s.n) = :'expected'::uuid[] AS in_order_once
FROM (VALUES (1), (2), (3), (7), (8), (100)) AS l(page_limit), scan_leases(701, l.page_limit) AS s
GROUP BY l.page_limit ORDER BY l.page_limit;

-- created_after: only leases created strictly after the instant, in any
-- RFC 3339 spelling of it; combined with paging.
SELECT created_at AS l4_created FROM claim_leases WHERE uuid = :'l4' \gset
SELECT count(*) AS after_l4,
       bool_and(lease <> :'l4'::uuid) AS l4_excluded,
       bool_or(lease = :'l5'::uuid) AS l5_included
FROM scan_leases(701, 100, rfc3339(:'l4_created'));
SELECT count(*) AS expected_after_l4 FROM claim_leases
WHERE creator_id = 701 AND state = 'outstanding' AND created_at > :'l4_created';
SELECT count(*) AS with_offset FROM scan_leases(701, 100,
    to_char(:'l4_created'::timestamptz AT TIME ZONE 'Asia/Kolkata', 'YYYY-MM-DD"T"HH24:MI:SS.US"+05:30"'));
SELECT count(*) AS with_paging FROM scan_leases(701, 2, rfc3339(:'l4_created'));
SELECT count(*) AS one_microsecond_earlier FROM scan_leases(701, 100, rfc3339(:'l4_created'::timestamptz - interval '1 microsecond'));
SELECT count(*) AS far_past FROM scan_leases(701, 100, '1970-01-01T00:00:00Z');
SELECT jsonb_array_length(claims_list_leases('{"cell_id": 701, "created_after": "2999-12-31T23:59:59.999999Z"}') -> 'leases') AS far_future;
SELECT jsonb_array_length(claims_list_leases('{"cellId": "701", "createdAfter": null, "next": null, "limit": null}') -> 'leases') AS camel_and_nulls;

-- Page size: absent or 0 means 100, above 1000 is coerced to 1000, negative
-- is refused. Cell 705 gets 1001 outstanding leases.
DO $$
BEGIN
    FOR i IN 1 .. 1001 LOOP
        PERFORM claims_begin_update(req(705, jsonb_build_array(rec('SNIPPET_IDS', (700000 + i)::text))));
    END LOOP;
END
$$;
SELECT jsonb_array_length(claims_list_leases('{"cell_id": 705}') -> 'leases') AS absent,
       jsonb_array_length(claims_list_leases('{"cell_id": 705, "limit": 0}') -> 'leases') AS zero,
       jsonb_array_length(claims_list_leases('{"cell_id": 705, "limit": 1}') -> 'leases') AS one,
       jsonb_array_length(claims_list_leases('{"cell_id": 705, "limit": 999}') -> 'leases') AS "999",
       jsonb_array_length(claims_list_leases('{"cell_id": 705, "limit": 1000}') -> 'leases') AS "1000",
       jsonb_array_length(claims_list_leases('{"cell_id": 705, "limit": 1001}') -> 'leases') AS "1001",
       jsonb_array_length(claims_list_leases('{"cell_id": 705, "limit": "2147483647"}') -> 'leases') AS max_int32;
SELECT claims_list_leases('{"cell_id": 705}') ? 'next' AS absent_has_next,
       claims_list_leases('{"cell_id": 705, "limit": 5000}') ? 'next' AS coerced_has_next;
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 705, "limit": -1}')$$);
SELECT count(*) AS leases, count(DISTINCT lease) AS distinct_leases, max(page) AS pages FROM scan_leases(705, 5000);
SELECT count(*) AS leases, max(page) AS pages FROM scan_leases(705, 0);
-- The token holds (created_at, uuid) of the last lease of its page: when
-- every later lease finishes before the next call, the next page is empty
-- and has no "next".
SELECT claims_list_leases('{"cell_id": 705, "limit": 1000}') AS p1 \gset
SELECT count(*) AS rolled_back FROM claim_leases l, claims_rollback(705, l.uuid) AS r
WHERE l.creator_id = 705 AND l.state = 'outstanding'
  AND l.uuid NOT IN (SELECT (e ->> 'uuid')::uuid FROM jsonb_array_elements(:'p1'::jsonb -> 'leases') AS e);
SELECT claims_list_leases(jsonb_build_object('cell_id', 705, 'limit', 1000, 'next', :'p1'::jsonb -> 'next')) AS p2;
-- Reconciliation: roll back everything a scan finds.
SELECT count(*) AS rolled_back FROM scan_leases(705, 1000) AS s, claims_rollback(705, s.lease) AS r;
SELECT claims_list_leases('{"cell_id": 705}') AS after_reconciliation;
SELECT count(*) AS claims_left FROM claims WHERE creator_id = 705;
