--
-- list_records: a cell's claims of one source type, ordered by source id
-- bytes and then bucket type, paged by source id. A page never splits the
-- records of one source id: it ends before such a group, so resuming with
-- source_id_gt = the last returned source id continues exactly, and a
-- single source id with more records than the limit comes whole.
--
\set SHOW_CONTEXT never

-- scan_records(request, limit): page through by source_id_gt = last source
-- id returned, until "truncated" is false. One row per record.
CREATE FUNCTION scan_records(request jsonb, page_limit int)
RETURNS TABLE (page int, n int, source_id text, record text)
LANGUAGE plpgsql AS $$
DECLARE
    answer jsonb;
    r jsonb;
BEGIN
    request := request || jsonb_build_object('limit', page_limit);
    page := 0;
    n := 0;
    LOOP
        page := page + 1;
        answer := claims_list_records(request);
        FOR r IN SELECT e FROM jsonb_array_elements(answer -> 'records') WITH ORDINALITY AS a(e, i) ORDER BY i LOOP
            n := n + 1;
            source_id := r #>> '{metadata,source,rails_primary_key_id}';
            record := source_id || ' ' || (r #>> '{metadata,bucket,type}') || '=' || (r #>> '{metadata,bucket,value}');
            RETURN NEXT;
        END LOOP;
        EXIT WHEN NOT (answer -> 'truncated')::boolean;
        IF jsonb_array_length(answer -> 'records') = 0 THEN
            RAISE EXCEPTION 'truncated page without records';
        END IF;
        request := request || jsonb_build_object('source_id_gt', source_id);
        IF page > 10000 THEN
            RAISE EXCEPTION 'scan does not end';
        END IF;
    END LOOP;
END
$$;

-- A cell without claims.
SELECT claims_list_records('{"cell_id": 800, "source_type": "RAILS_TABLE_USERS"}') AS empty;

-- Cell 801, source RAILS_TABLE_USERS. Source ids in byte order, with their
-- groups of records:
--   01 (AQ==): 2   0102 (AQI=): 1   02 (Ag==): 4   0200 (AgA=): 1
--   7f (fw==): 2   ff (/w==): 3     ff00 (/wA=): 1
-- created in an order unrelated to it, in two leases.
CREATE FUNCTION rec_b64(bucket_type text, value text, source_id text, source_type text DEFAULT 'RAILS_TABLE_USERS')
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('bucket', jsonb_build_object('type', bucket_type, 'value', value),
                              'subject', '{"type": "USER", "id": 8}'::jsonb,
                              'source', jsonb_build_object('type', source_type, 'rails_primary_key_id', source_id))
$$;
SELECT claims_begin_update(req(801, jsonb_build_array(
    rec_b64('EMAILS', 'ff@x', '/w=='), rec_b64('ROUTES', 'c', 'Ag=='), rec_b64('USERNAMES', 'a', 'AQ=='),
    rec_b64('USER_IDS', '2', 'Ag=='), rec_b64('USERNAMES', 'ff00', '/wA='), rec_b64('ROUTES', 'ff', '/w=='),
    rec_b64('EMAILS', 'c@x', 'Ag==')))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(801, :'l');
SELECT claims_begin_update(req(801, jsonb_build_array(
    rec_b64('USERNAMES', 'c', 'Ag=='), rec_b64('EMAILS', '7f@x', 'fw'), rec_b64('ROUTES', 'b', 'AQI'),
    rec_b64('USERNAMES', 'ff', '_w'), rec_b64('EMAILS', 'a@x', 'AQ'), rec_b64('USERNAMES', '7f', 'fw=='),
    rec_b64('ROUTES', 'd', 'AgA=')))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(801, :'l');
-- Noise that must not show: another cell with the same source ids, and cell
-- 801's claims of another source type.
SELECT claims_begin_update(req(802, jsonb_build_array(rec_b64('USERNAMES', 'other-a', 'AQ=='), rec_b64('ROUTES', 'other-c', 'Ag==')))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(802, :'l');
SELECT claims_begin_update(req(801, jsonb_build_array(rec_b64('ROUTES', 'email-table', 'AQ==', 'RAILS_TABLE_EMAILS')))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(801, :'l');

-- Everything: source id bytes first, then bucket type.
SELECT records_of(a) AS records, a -> 'truncated' AS truncated
FROM claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS"}') AS a;
-- Each entry is a full Record in proto3 JSON.
SELECT jsonb_pretty(scrub(claims_list_records('{"cell_id": 801, "source_type": 1, "limit": 1}') -> 'records' -> 0)) AS first_record;
SELECT bool_and(r #>> '{metadata,source,type}' = 'RAILS_TABLE_USERS') AS all_users,
       bool_and(r ->> 'cell_id' = '801') AS all_cell_801, bool_and(r ->> 'status' = 'ACTIVE') AS all_active
FROM jsonb_array_elements(claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS"}') -> 'records') AS r;
-- Claims under an outstanding lease are listed too, with their status.
SELECT claims_begin_update(req(801, jsonb_build_array(rec_b64('ROUTES', 'a/new', 'AQ==')), jsonb_build_array(bkt('EMAILS', 'a@x')))) ->> 'lease_uuid' AS lo \gset
SELECT r #>> '{metadata,bucket,value}' AS value, r ->> 'status' AS status, coalesce(r ->> 'lease_uuid' = :'lo', false) AS under_lease
FROM jsonb_array_elements(claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS", "source_id_lte": "AQ=="}') -> 'records') AS r;
SELECT claims_rollback(801, :'lo');
-- The other source type holds its own record only.
SELECT records_of(claims_list_records('{"cellId": 801, "sourceType": "RAILS_TABLE_EMAILS"}')) AS emails_table;

-- A page edge inside a group: with limit 4 the fourth record would be the
-- first of 02's four, so the page ends after 0102 and says it is truncated.
SELECT records_of(a) AS records, a -> 'truncated' AS truncated
FROM claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS", "limit": 4}') AS a;
-- Resuming after the last returned source id continues exactly with 02, and
-- its group comes whole although it is larger than the limit.
SELECT records_of(a) AS records, a -> 'truncated' AS truncated
FROM claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS", "limit": 3, "source_id_gt": "AQI="}') AS a;
SELECT records_of(a) AS records, a -> 'truncated' AS truncated
FROM claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS", "limit": 1, "source_id_gt": "AQI="}') AS a;
-- A page that fits whole groups exactly.
SELECT records_of(a) AS records, a -> 'truncated' AS truncated
FROM claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS", "limit": 3}') AS a;
-- The last page is not truncated.
SELECT records_of(a) AS records, a -> 'truncated' AS truncated
FROM claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS", "limit": 3, "source_id_gt": "/w=="}') AS a;
SELECT records_of(a) AS records, a -> 'truncated' AS truncated
FROM claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS", "limit": 1, "source_id_gt": "/wA="}') AS a;

-- Full scans with every page size give the unpaged list, and no source id is
-- split between pages.
SELECT records_of(claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS"}')) AS everything \gset
SELECT l.page_limit, count(*) AS records, max(s.page) AS pages,
       array_agg(s.record ORDER BY s.n) = :'everything'::text[] AS same_as_unpaged,
       (SELECT count(*) FROM (SELECT s2.source_id FROM scan_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS"}', l.page_limit) AS s2
                              GROUP BY s2.source_id HAVING count(DISTINCT s2.page) > 1) AS split) AS split_groups
FROM generate_series(1, 15) AS l(page_limit),
     scan_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS"}', l.page_limit) AS s
GROUP BY l.page_limit ORDER BY l.page_limit;
-- The pages of limit 2, one per row.
SELECT page, array_agg(record ORDER BY n) AS records
FROM scan_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS"}', 2) GROUP BY page ORDER BY page;

-- source_id_gt (exclusive) and source_id_lte (inclusive), in byte order:
-- 0102 and 0200 lie between 01, 02 and ff; any base64 spelling.
SELECT q.label, records_of(claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS"}'::jsonb || q.range)) AS records
FROM (VALUES (1, 'gt 01', '{"source_id_gt": "AQ=="}'::jsonb),
             (2, 'gt 01, lte 02', '{"source_id_gt": "AQ", "source_id_lte": "Ag"}'),
             (3, 'gt 0101 (no such id)', '{"source_id_gt": "AQE="}'),
             (4, 'lte 0200', '{"sourceIdLte": "AgA="}'),
             (5, 'gt 02, lte 7f', '{"sourceIdGt": "Ag==", "sourceIdLte": "fw=="}'),
             (6, 'gt 00', '{"source_id_gt": "AA=="}'),
             (7, 'gt 7f, lte ffff', '{"source_id_gt": "fw==", "source_id_lte": "__8"}'),
             (8, 'gt ff00', '{"source_id_gt": "/wA="}'),
             (9, 'gt 02, lte 01', '{"source_id_gt": "Ag==", "source_id_lte": "AQ=="}'),
             (10, 'gt 02, lte 02', '{"source_id_gt": "Ag==", "source_id_lte": "Ag=="}'),
             (11, 'empty bounds = unbounded', '{"source_id_gt": "", "source_id_lte": ""}'),
             (12, 'null bounds = unbounded', '{"source_id_gt": null, "source_id_lte": null}')) AS q(i, label, range)
ORDER BY q.i;
-- A range with paging: the lte bound holds on every page and the last page
-- of the range is not truncated.
SELECT page, array_agg(record ORDER BY n) AS records
FROM scan_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS", "source_id_gt": "AQ==", "source_id_lte": "fw=="}', 2)
GROUP BY page ORDER BY page;
SELECT records_of(a) AS records, a -> 'truncated' AS truncated
FROM claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS", "limit": 1, "source_id_gt": "AQI=", "source_id_lte": "Ag=="}') AS a;

-- bucket_types and claim_types filters (names, aliases or numbers).
SELECT q.label, records_of(claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS"}'::jsonb || q.filter)) AS records
FROM (VALUES (1, 'bucket_types USERNAMES', '{"bucket_types": ["USERNAMES"]}'::jsonb),
             (2, 'bucket_types 4, EMAILS', '{"bucket_types": [4, "EMAILS"]}'),
             (3, 'claim_types ROUTES', '{"claim_types": ["ROUTES"]}'),
             (4, 'claimTypes USER_IDS', '{"claimTypes": [10]}'),
             (5, 'bucket_types PROJECT_IDS', '{"bucket_types": ["PROJECT_IDS"]}'),
             (6, 'bucket_types empty = all', '{"bucket_types": []}'),
             (7, 'bucket_types null = all', '{"bucket_types": null}')) AS q(i, label, filter)
ORDER BY q.i;
-- claim_types as proto3 JSON writes that repeated types.v1.ClaimType field:
-- CLAIM_TYPE_ and the claim field in upper case, alone or mixed with
-- numbers; each lists what the same filter by number lists.
SELECT q.label, records_of(claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS"}'::jsonb || q.filter)) AS records,
       records_of(claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS"}'::jsonb || q.filter))
         = records_of(claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS"}'::jsonb || q.by_number)) AS same_as_numbers
FROM (VALUES (1, 'claim_types CLAIM_TYPE_ROUTE', '{"claim_types": ["CLAIM_TYPE_ROUTE"]}'::jsonb, '{"claim_types": [1]}'::jsonb),
             (2, 'claimTypes CLAIM_TYPE_USER_ID', '{"claimTypes": ["CLAIM_TYPE_USER_ID"]}', '{"claim_types": [10]}'),
             (3, 'CLAIM_TYPE_USERNAME, CLAIM_TYPE_EMAIL', '{"claim_types": ["CLAIM_TYPE_USERNAME", "CLAIM_TYPE_EMAIL"]}', '{"claim_types": [4, 5]}'),
             (4, 'CLAIM_TYPE_PROJECT_ID and 4', '{"claim_types": ["CLAIM_TYPE_PROJECT_ID", 4]}', '{"claim_types": [6, 4]}')) AS q(i, label, filter, by_number)
ORDER BY q.i;
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 801, "source_type": 1, "claim_types": ["CLAIM_TYPE_UNSPECIFIED"]}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 801, "source_type": 1, "claim_types": ["CLAIM_TYPE_USERNAMES"]}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 801, "source_type": 1, "claim_types": ["CLAIM_TYPE_user_id"]}')$$);
-- Filters with paging: groups count only the records that pass the filter.
SELECT page, array_agg(record ORDER BY n) AS records
FROM scan_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS", "bucket_types": ["USERNAMES", "EMAILS"]}', 2)
GROUP BY page ORDER BY page;

-- Integer source ids are 8 bytes big-endian, so they list in numeric order
-- for non-negative ids, and negative ones (two's complement) after them.
SELECT claims_begin_update(req(803, jsonb_build_array(
    rec('PROJECT_IDS', '256', 1, 'RAILS_TABLE_PROJECTS', 256), rec('PROJECT_IDS', '-1', 1, 'RAILS_TABLE_PROJECTS', -1),
    rec('PROJECT_IDS', '2', 1, 'RAILS_TABLE_PROJECTS', 2), rec('PROJECT_IDS', '1', 1, 'RAILS_TABLE_PROJECTS', 1),
    rec('ROUTES', 'p/2', 1, 'RAILS_TABLE_PROJECTS', 2)))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(803, :'l');
SELECT records_of(claims_list_records('{"cell_id": 803, "source_type": "RAILS_TABLE_PROJECTS"}')) AS records;
SELECT records_of(claims_list_records('{"cell_id": 803, "source_type": 4, "source_id_gt": "AAAAAAAAAAE=", "source_id_lte": "AAAAAAAAAQA="}')) AS records;
-- The source type by alias: RAILS_TABLE_GROUPS is RAILS_TABLE_NAMESPACES.
SELECT claims_begin_update(req(803, jsonb_build_array(rec('NAMESPACE_IDS', '5', 1, 'RAILS_TABLE_NAMESPACES', 5)))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(803, :'l');
SELECT records_of(claims_list_records('{"cell_id": 803, "source_type": "RAILS_TABLE_GROUPS"}')) AS by_alias,
       records_of(claims_list_records('{"cell_id": 803, "source_type": 5}')) AS by_number;

-- Page size: absent, 0 and anything above 1000 mean 1000; negative is
-- refused. Cell 805 has 1001 source ids of one record each.
SELECT claims_begin_update(jsonb_build_object('cell_id', 805, 'create_records',
    (SELECT jsonb_agg(rec('SNIPPET_IDS', (500000 + i)::text, 1, 'RAILS_TABLE_SNIPPETS', i)) FROM generate_series(1, 600) AS i))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(805, :'l');
SELECT claims_begin_update(jsonb_build_object('cell_id', 805, 'create_records',
    (SELECT jsonb_agg(rec('SNIPPET_IDS', (500000 + i)::text, 1, 'RAILS_TABLE_SNIPPETS', i)) FROM generate_series(601, 1001) AS i))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(805, :'l');
SELECT q.label, jsonb_array_length(a -> 'records') AS records, a -> 'truncated' AS truncated,
       a #>> '{records,-1,metadata,bucket,value}' AS last_value
FROM (VALUES (1, 'absent', '{}'::jsonb), (2, '0', '{"limit": 0}'), (3, '1', '{"limit": 1}'),
             (4, '999', '{"limit": 999}'), (5, '1000', '{"limit": 1000}'), (6, '1001', '{"limit": "1001"}'),
             (7, '2147483647', '{"limit": 2147483647}')) AS q(i, label, lim),
     claims_list_records('{"cell_id": 805, "source_type": "RAILS_TABLE_SNIPPETS"}'::jsonb || q.lim) AS a
ORDER BY q.i;
SELECT records_of(a) AS records, a -> 'truncated' AS truncated
FROM claims_list_records('{"cell_id": 805, "source_type": "RAILS_TABLE_SNIPPETS", "source_id_gt": "AAAAAAAAA+g="}') AS a;
SELECT count(*) AS records, max(page) AS pages, count(DISTINCT source_id) AS source_ids
FROM scan_records('{"cell_id": 805, "source_type": "RAILS_TABLE_SNIPPETS"}', 0);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 805, "source_type": "RAILS_TABLE_SNIPPETS", "limit": -1}')$$);

-- One source id with more records than the largest page (1005 records of
-- source id 07) comes whole, followed by the next source id on the next page.
SELECT claims_begin_update(jsonb_build_object('cell_id', 806, 'create_records',
    (SELECT jsonb_agg(rec_b64('ROUTES', 'm/' || i, 'Bw==', 'RAILS_TABLE_MEMBERS')) FROM generate_series(1, 1000) AS i))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(806, :'l');
SELECT claims_begin_update(jsonb_build_object('cell_id', 806, 'create_records',
    (SELECT jsonb_agg(rec_b64('ROUTES', 'm/' || i, 'Bw==', 'RAILS_TABLE_MEMBERS')) FROM generate_series(1001, 1005) AS i)
    || jsonb_build_array(rec_b64('ROUTES', 'm/next', 'CA==', 'RAILS_TABLE_MEMBERS')))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(806, :'l');
SELECT jsonb_array_length(a -> 'records') AS records, a -> 'truncated' AS truncated,
       (SELECT count(DISTINCT r #>> '{metadata,source,rails_primary_key_id}') FROM jsonb_array_elements(a -> 'records') AS r) AS source_ids
FROM claims_list_records('{"cell_id": 806, "source_type": "RAILS_TABLE_MEMBERS"}') AS a;
SELECT jsonb_array_length(a -> 'records') AS records, a -> 'truncated' AS truncated
FROM claims_list_records('{"cell_id": 806, "source_type": "RAILS_TABLE_MEMBERS", "limit": 10}') AS a;
SELECT records_of(a) AS records, a -> 'truncated' AS truncated
FROM claims_list_records('{"cell_id": 806, "source_type": "RAILS_TABLE_MEMBERS", "source_id_gt": "Bw=="}') AS a;
SELECT jsonb_array_length(a -> 'records') AS records, a -> 'truncated' AS truncated
FROM claims_list_records('{"cell_id": 806, "source_type": "RAILS_TABLE_MEMBERS", "source_id_lte": "Bw=="}') AS a;
