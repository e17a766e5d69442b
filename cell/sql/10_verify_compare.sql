-- verify_compare() classifies a batch as the SQL comparison of claims_cell
-- 1.4 did: the same counts, duplicates and fixes for entries and records
-- of every kind (ok, drifted, missing, extra, duplicate, moved, and recent
-- by source id, status, updated_at or a change between the two listings).
\set VERBOSITY terse
CREATE TEMP TABLE vc_entries (sid text, pk text, bucket_type text, value text,
                              subject_type text, subject_id bigint, source_type text, col text);
INSERT INTO vc_entries VALUES
  ('01', '1', 'USERNAMES', 'ok', 'USER', 1, 'RAILS_TABLE_USERS', 'username'),
  ('02', '2', 'USERNAMES', 'drift', 'USER', 3, 'RAILS_TABLE_USERS', 'username'),
  ('03', '3', 'USERNAMES', 'gone', 'USER', 3, 'RAILS_TABLE_USERS', 'username'),
  ('05', '5', 'USERNAMES', 'twin', 'USER', 5, 'RAILS_TABLE_USERS', 'username'),
  ('06', '6', 'USERNAMES', 'twin', 'USER', 6, 'RAILS_TABLE_USERS', 'username'),
  ('07', '7', 'USERNAMES', 'moved', 'USER', 7, 'RAILS_TABLE_USERS', 'username'),
  ('08', '8', 'USERNAMES', 'pending', 'USER', 99, 'RAILS_TABLE_USERS', 'username'),
  ('09', '9', 'USERNAMES', 'fresh', 'USER', 99, 'RAILS_TABLE_USERS', 'username'),
  ('0a', '10', 'USERNAMES', 'recentrow', 'USER', 10, 'RAILS_TABLE_USERS', 'username'),
  ('0b', '11', 'USERNAMES', 'changed', 'USER', 11, 'RAILS_TABLE_USERS', 'username'),
  ('0c', '12', 'EMAILS', 'ok', 'USER', 12, 'RAILS_TABLE_USERS', 'email'),
  ('0d', '13', 'USERNAMES', 'Ümlaut "q"', 'USER', 13, 'RAILS_TABLE_USERS', 'username'),
  ('0e', '14', 'USERNAMES', 'othersource', 'USER', 14, 'RAILS_TABLE_USERS', 'username');
-- one record as the store lists it
CREATE FUNCTION pg_temp.rec(bt text, v text, sid bytea, sj bigint, status text DEFAULT 'ACTIVE',
                            updated text DEFAULT '2020-01-01T00:00:00Z', st text DEFAULT 'RAILS_TABLE_USERS')
RETURNS jsonb LANGUAGE sql AS $$
SELECT jsonb_build_object('uuid', md5(bt || v)::uuid,
         'metadata', jsonb_build_object('bucket', jsonb_build_object('type', bt, 'value', v),
                                        'subject', jsonb_build_object('type', 'USER', 'id', sj),
                                        'source', jsonb_build_object('type', st,
                                            'rails_primary_key_id', encode(sid, 'base64'))),
         'status', status, 'updated_at', updated)
$$;
CREATE TEMP TABLE vc_stored AS
SELECT jsonb_build_array(
         pg_temp.rec('USERNAMES', 'ok', '\x01', 1),
         pg_temp.rec('USERNAMES', 'drift', '\x02', 2),
         pg_temp.rec('USERNAMES', 'left', '\x04', 4),
         pg_temp.rec('USERNAMES', 'twin', '\x05', 5),
         pg_temp.rec('USERNAMES', 'pending', '\x08', 8, 'PENDING'),
         pg_temp.rec('USERNAMES', 'fresh', '\x09', 9, 'ACTIVE', '2999-01-01T00:00:00Z'),
         pg_temp.rec('USERNAMES', 'recentrow', '\x0a', 77),
         pg_temp.rec('USERNAMES', 'changed', '\x0b', 11),
         pg_temp.rec('USERNAMES', 'vanished', '\x0f', 15),
         pg_temp.rec('EMAILS', 'ok', '\x0c', 12),
         pg_temp.rec('USERNAMES', 'Ümlaut "q"', '\x0d', 13),
         pg_temp.rec('USERNAMES', 'othersource', '\x0e', 14, 'ACTIVE', '2020-01-01T00:00:00Z', 'RAILS_TABLE_X')) AS s1,
       jsonb_build_array(
         pg_temp.rec('USERNAMES', 'ok', '\x01', 1),
         pg_temp.rec('USERNAMES', 'drift', '\x02', 2),
         pg_temp.rec('USERNAMES', 'left', '\x04', 4),
         pg_temp.rec('USERNAMES', 'twin', '\x05', 5),
         pg_temp.rec('USERNAMES', 'pending', '\x08', 8, 'PENDING'),
         pg_temp.rec('USERNAMES', 'fresh', '\x09', 9, 'ACTIVE', '2999-01-01T00:00:00Z'),
         pg_temp.rec('USERNAMES', 'recentrow', '\x0a', 77),
         pg_temp.rec('USERNAMES', 'changed', '\x0b', 11, 'ACTIVE', '2020-01-02T00:00:00Z'),
         pg_temp.rec('USERNAMES', 'appeared', '\x10', 16),
         pg_temp.rec('EMAILS', 'ok', '\x0c', 12),
         pg_temp.rec('USERNAMES', 'Ümlaut "q"', '\x0d', 13),
         pg_temp.rec('USERNAMES', 'othersource', '\x0e', 14, 'ACTIVE', '2020-01-01T00:00:00Z', 'RAILS_TABLE_X')) AS s2;
-- the 1.4 comparison (verify_slice's query) over the same inputs
CREATE FUNCTION pg_temp.sql_compare(expected jsonb, stored jsonb, stored2 jsonb, recent_sids text[],
                                    moved text[], cutoff timestamptz)
RETURNS TABLE (n_duplicate bigint, n_fixes bigint, n_recent bigint, duplicates text, fixes jsonb)
LANGUAGE sql AS $$
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
SELECT pg_catalog.count(*) FILTER (WHERE kind = 'duplicate'),
       pg_catalog.count(*) FILTER (WHERE kind IN ('missing', 'extra', 'drifted')),
       pg_catalog.count(*) FILTER (WHERE kind = 'recent'),
       pg_catalog.string_agg(pg_catalog.format('%s=%s (rows %s)', e_bucket, e_value, pk), ', ' ORDER BY pk)
           FILTER (WHERE kind = 'duplicate'),
       COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
           'kind', kind, 'pk', pk, 'col', col, 'sid', e_sid,
           'bucket_type', COALESCE(e_bucket, r_bucket), 'value', COALESCE(e_value, r_value),
           'subject_type', e_subject_type, 'subject_id', e_subject_id, 'source_type', e_source_type)
           ORDER BY COALESCE(e_bucket, r_bucket) COLLATE "C", COALESCE(e_value, r_value) COLLATE "C")
           FILTER (WHERE kind IN ('missing', 'extra', 'drifted')), '[]')
  FROM j
$$;
-- the C comparison, the store's side given as the text of listing pages
CREATE FUNCTION pg_temp.c_compare(stored jsonb, stored2 jsonb, recent_sids text[], moved text[],
                                  cutoff timestamptz)
RETURNS TABLE (n_duplicate bigint, n_fixes bigint, n_recent bigint, duplicates text, fixes jsonb)
LANGUAGE sql AS $$
SELECT c.* FROM claims_cell.verify_compare(
    (SELECT array_agg(sid ORDER BY pk) FROM vc_entries), (SELECT array_agg(pk ORDER BY pk) FROM vc_entries),
    (SELECT array_agg(bucket_type ORDER BY pk) FROM vc_entries), (SELECT array_agg(value ORDER BY pk) FROM vc_entries),
    (SELECT array_agg(subject_type ORDER BY pk) FROM vc_entries), (SELECT array_agg(subject_id ORDER BY pk) FROM vc_entries),
    (SELECT array_agg(source_type ORDER BY pk) FROM vc_entries), (SELECT array_agg(col ORDER BY pk) FROM vc_entries),
    -- the first listing in two pages, the second in one
    ARRAY[jsonb_build_object('records', jsonb_build_array(stored->0), 'truncated', true)::text,
          jsonb_build_object('records', stored - 0, 'truncated', false)::text],
    CASE WHEN stored2 = stored
         THEN ARRAY[jsonb_build_object('records', jsonb_build_array(stored->0), 'truncated', true)::text,
                    jsonb_build_object('records', stored - 0, 'truncated', false)::text]
         ELSE ARRAY[jsonb_build_object('records', stored2, 'truncated', false)::text] END,
    recent_sids, moved, cutoff) c
$$;
-- one listing, then two that differ; with and without recent rows and moved values
CREATE TEMP TABLE vc_cases AS
SELECT n, s1, CASE WHEN n IN (1, 3) THEN s1 ELSE s2 END AS s2,
       CASE WHEN n >= 3 THEN ARRAY['0a', '10'] END AS recent,
       CASE WHEN n >= 3 THEN ARRAY['USERNAMES:moved'] ELSE '{}' END AS moved
  FROM vc_stored, generate_series(1, 4) n;
SELECT n, c.n_duplicate, c.n_fixes, c.n_recent, c.duplicates,
       (SELECT string_agg(f->>'kind' || ' ' || (f->>'bucket_type') || '=' || (f->>'value'), ', ')
          FROM jsonb_array_elements(c.fixes) f) AS fixes
  FROM vc_cases, pg_temp.c_compare(s1, s2, recent, moved, '2026-01-01') c ORDER BY n;
-- the same as the 1.4 SQL, fixes in the same order
SELECT n, (SELECT row(c.*)::text FROM pg_temp.c_compare(s1, s2, recent, moved, '2026-01-01') c)
          = (SELECT row(s.*)::text
               FROM pg_temp.sql_compare((SELECT jsonb_agg(to_jsonb(v) ORDER BY pk) FROM vc_entries v),
                                        s1, s2, recent, moved, '2026-01-01') s) AS same_as_sql
  FROM vc_cases ORDER BY n;
-- a drifted fix stays while its row still holds it; one whose row changed
-- or is recent is skipped; an extra one stays
SELECT k.skipped, (SELECT string_agg(f->>'kind' || ' ' || (f->>'value'), ', ') FROM jsonb_array_elements(k.fixes) f)
  FROM claims_cell.verify_keep_fixes(
         '[{"kind": "drifted", "sid": "02", "bucket_type": "USERNAMES", "value": "drift", "subject_id": 3},
           {"kind": "extra", "sid": null, "bucket_type": "USERNAMES", "value": "left", "subject_id": null},
           {"kind": "missing", "sid": "03", "bucket_type": "USERNAMES", "value": "gone", "subject_id": 3},
           {"kind": "missing", "sid": "0a", "bucket_type": "USERNAMES", "value": "recentrow", "subject_id": 10}]',
         ARRAY['02', '03', '0a'], ARRAY['USERNAMES', 'USERNAMES', 'USERNAMES'],
         ARRAY['drift', 'gone-renamed', 'recentrow'], ARRAY[3, 3, 10]::bigint[], ARRAY['0a']) k;
-- a record without a bucket value matches no entry and, in the 1.4 full
-- join of the two listings, not even itself: changed, so recent, never an
-- extra fix to repair
CREATE TEMP TABLE vc_novalue AS
SELECT n, jsonb_build_array(pg_temp.rec('USERNAMES', 'novalue', '\x20', 20) #- '{metadata,bucket,value}') AS s1,
       CASE WHEN n = 1 THEN jsonb_build_array(pg_temp.rec('USERNAMES', 'novalue', '\x20', 20) #- '{metadata,bucket,value}')
            ELSE jsonb_build_array(pg_temp.rec('USERNAMES', 'novalue', '\x20', 20) #- '{metadata,bucket,value}',
                                   pg_temp.rec('USERNAMES', 'ok', '\x01', 1)) END AS s2
  FROM generate_series(1, 2) n;
SELECT n, c.n_fixes, c.n_recent,
       row(c.*)::text = (SELECT row(s.*)::text FROM pg_temp.sql_compare('[]', s1, s2, NULL, '{}', '2026-01-01') s)
           AS same_as_sql
  FROM vc_novalue,
       claims_cell.verify_compare(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           ARRAY[jsonb_build_object('records', s1, 'truncated', false)::text],
           ARRAY[jsonb_build_object('records', s2, 'truncated', false)::text],
           NULL, '{}', '2026-01-01') c
 ORDER BY n;
-- a listing page that is not JSON is the store's protocol violation (08P01)
\set VERBOSITY sqlstate
SELECT * FROM claims_cell.verify_compare(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    ARRAY['{"records": [{"metadata": }], "truncated": false}'], ARRAY['{"records": [], "truncated": false}'],
    NULL, NULL, '2026-01-01');
\set VERBOSITY terse
-- a listing page is read as JSON, however it is written: escapes in names
-- and values, other whitespace, members the comparison does not read
CREATE FUNCTION pg_temp.page_compare(page text) RETURNS text LANGUAGE sql AS $$
SELECT row(c.*)::text FROM claims_cell.verify_compare(
    ARRAY['01', '02', '03'], ARRAY['1', '2', '3'], ARRAY['USERNAMES', 'USERNAMES', 'USERNAMES'],
    ARRAY['a/b', 'Ümlaut 😀', E'tab\t"q"\\'], ARRAY['USER', 'USER', 'USER'], ARRAY[1, 2, 3]::bigint[],
    ARRAY['RAILS_TABLE_USERS', 'RAILS_TABLE_USERS', 'RAILS_TABLE_USERS'], ARRAY['username', 'username', 'username'],
    ARRAY[page], ARRAY[page], NULL, '{}', '2026-01-01') c
$$;
CREATE TEMP TABLE vc_page AS
SELECT jsonb_build_object('records', jsonb_build_array(
           pg_temp.rec('USERNAMES', 'a/b', '\x01', 1), pg_temp.rec('USERNAMES', 'Ümlaut 😀', '\x02', 2),
           pg_temp.rec('USERNAMES', E'tab\t"q"\\', '\x03', 9)), 'truncated', false)::text AS page;
SELECT pg_temp.page_compare(page) FROM vc_page;
SELECT v.how, pg_temp.page_compare(v.page) = pg_temp.page_compare(p.page) AS same_as_written_by_jsonb
  FROM vc_page p, LATERAL (VALUES
    ('escapes', replace(replace(replace(replace(replace(replace(p.page,
        'a/b', 'a\/b'), 'Ümlaut 😀', '\u00dcmlaut \ud83D\uDE00'), '"status"', '"st\u0061tus"'),
        '"metadata"', '"m\u0065tadata"'), '"bucket"', '"b\u0075cket"'), '\t', '\u0009')),
    ('whitespace', E' \n' || replace(replace(p.page, ', ', E' ,\n\t'), ': ', E' :\r\n ') || E'\t\n'),
    ('other members', replace(p.page, '{"uuid": ',
        '{"user_data": {"k": ["}", "\"metadata\": {\"bucket\": {\"value\": \"x\"}}", '
        '{"a": [1, -2.5E+3, 0.5e-1, 0, true, false, null, [], {}]}], "": "\\\""}, "uuid": '))) AS v(how, page)
 ORDER BY 1;
-- values of every kind of character, written by jsonb and with every
-- character escaped as \u and four hex digits (upper and lower case,
-- surrogate pairs above U+FFFF): each value matches its row's, nothing to
-- repair
CREATE TEMP TABLE vc_chars AS
SELECT i, string_agg(chr(x.c), '' ORDER BY x.j) AS v
  FROM generate_series(1, 60) i,
       LATERAL (SELECT j, (ARRAY[1, 8, 9, 10, 12, 13, 31, 32, 34, 47, 92, 127, 128, 233, 2047, 2048, 8232,
                                 55295, 57344, 65533, 65535, 65536, 128512, 1114111])[1 + (i * 7 + j * 13) % 24] AS c
                  FROM generate_series(1, 1 + i % 9) j) x
 GROUP BY i;
CREATE FUNCTION pg_temp.json_escaped(v text, upper_hex boolean) RETURNS text LANGUAGE sql AS $$
SELECT '"\u' || string_agg(CASE WHEN upper_hex THEN replace(upper(t.e), 'U', 'u') ELSE t.e END, '\u' ORDER BY t.n) || '"'
  FROM (SELECT n, CASE WHEN ascii(ch) < 65536 THEN lpad(to_hex(ascii(ch)), 4, '0')
                       ELSE to_hex(55296 + ((ascii(ch) - 65536) >> 10)) || '\u'
                            || to_hex(56320 + ((ascii(ch) - 65536) & 1023)) END AS e
          FROM regexp_split_to_table(v, '') WITH ORDINALITY AS s(ch, n)) t
$$;
CREATE FUNCTION pg_temp.chars_compare(how text) RETURNS text LANGUAGE sql AS $$
SELECT row(c.n_duplicate, c.n_fixes, c.n_recent)::text
  FROM (SELECT '{"records": [' || string_agg(format(
                   '{"metadata": {"bucket": {"type": "USERNAMES", "value": %s}, "subject": {"type": "USER", "id": %s}, '
                   '"source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": "%s"}}, "status": "ACTIVE", '
                   '"updated_at": "2020-01-01T00:00:00Z"}',
                   CASE how WHEN 'jsonb' THEN to_jsonb(v)::text
                            WHEN 'escaped' THEN pg_temp.json_escaped(v, false)
                            ELSE pg_temp.json_escaped(v, true) END,
                   i, encode(int8send(i), 'base64')), ', ') || '], "truncated": false}' AS page
          FROM vc_chars) p,
       claims_cell.verify_compare(
           (SELECT array_agg(encode(int8send(i), 'hex') ORDER BY i) FROM vc_chars),
           (SELECT array_agg(i::text ORDER BY i) FROM vc_chars),
           (SELECT array_agg('USERNAMES'::text ORDER BY i) FROM vc_chars), (SELECT array_agg(v ORDER BY i) FROM vc_chars),
           (SELECT array_agg('USER'::text ORDER BY i) FROM vc_chars), (SELECT array_agg(i ORDER BY i) FROM vc_chars),
           (SELECT array_agg('RAILS_TABLE_USERS'::text ORDER BY i) FROM vc_chars),
           (SELECT array_agg('username'::text ORDER BY i) FROM vc_chars),
           ARRAY[p.page], ARRAY[p.page], NULL, '{}', '2026-01-01') c
$$;
SELECT how, pg_temp.chars_compare(how) FROM unnest(ARRAY['jsonb', 'escaped', 'ESCAPED']) how;
-- and JSON only: each of these is the store's protocol violation (08P01)
CREATE FUNCTION pg_temp.page_error(page text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_temp.page_compare(page);
    RETURN 'read';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;
SELECT replace(v.page, chr(1), '<0x01>') AS page, pg_temp.page_error(v.page)
  FROM (VALUES ('{"records": []}'), ('{}'), ('{"records": [}'), ('{"records": [], "truncated": false} x'),
               ('{"records": ["a' || chr(1) || '"]}'), ('{"records": ["\ud800"]}'), ('{"records": ["\ud800\u0041"]}'),
               ('{"records": ["\udc00"]}'), ('{"records": ["\u0000"]}'), ('{"records": ["\u00g0"]}'),
               ('{"records": ["\q"]}'), ('{"records": ["abc'), ('{"records": [01]}'), ('{"records": [1.]}'),
               ('{"records": [-]}'), ('{"records": [1e]}'), ('{"records": [1x]}'), ('{"records": [tru]}'),
               ('{"records": [truex]}'), ('{"records": [{"status": "ACTIVE",}]}'), ('{"records" []}'),
               ('[]'), ('"records"'), ('')) AS v(page);
-- arrays of different lengths are refused, naming the argument
SELECT * FROM claims_cell.verify_keep_fixes('[]', ARRAY['02', '03'], ARRAY['USERNAMES', 'USERNAMES'],
                                            ARRAY['drift'], ARRAY[3, 3]::bigint[], NULL);
SELECT * FROM claims_cell.verify_compare(ARRAY['02'], ARRAY['2'], ARRAY['USERNAMES'], ARRAY['drift'], ARRAY['USER'],
                                         ARRAY[3, 4]::bigint[], ARRAY['RAILS_TABLE_USERS'], ARRAY['username'],
                                         '{}', '{}', NULL, '{}', '2026-01-01');
SELECT * FROM claims_cell.verify_keep_fixes('[1]', NULL, NULL, NULL, NULL, NULL);
-- an array element is not an object either (never read as one)
SELECT * FROM claims_cell.verify_keep_fixes('[["kind", "extra"]]', NULL, NULL, NULL, NULL, NULL);
