--
-- Limits and settings: claims.max_batch_size (creates and destroys counted
-- together, 54000 above it, superuser-only), and who may touch the tables.
--
\set SHOW_CONTEXT never

SHOW claims.max_batch_size;

-- At the default (1000): 1000 records pass, 1001 do not, whether creates,
-- destroys or both.
SELECT claims_begin_update(jsonb_build_object('cell_id', 1001, 'create_records',
    (SELECT jsonb_agg(rec('SNIPPET_IDS', (900000 + i)::text, 1, 'RAILS_TABLE_SNIPPETS', i)) FROM generate_series(1, 1000) AS i)))
    ->> 'lease_uuid' AS l \gset
SELECT count(*) AS leased FROM claims WHERE lease_uuid = :'l';
SELECT claims_rollback(1001, :'l');
SELECT expect_error(format('SELECT claims_begin_update(%L)', jsonb_build_object('cell_id', 1001, 'create_records',
    (SELECT jsonb_agg(rec('SNIPPET_IDS', (900000 + i)::text, 1, 'RAILS_TABLE_SNIPPETS', i)) FROM generate_series(1, 1001) AS i))));
SELECT expect_error(format('SELECT claims_begin_update(%L)', jsonb_build_object('cell_id', 1001,
    'create_records', (SELECT jsonb_agg(rec('SNIPPET_IDS', (900000 + i)::text, 1, 'RAILS_TABLE_SNIPPETS', i)) FROM generate_series(1, 600) AS i),
    'destroy_records', (SELECT jsonb_agg(bkt('SNIPPET_IDS', (800000 + i)::text)) FROM generate_series(1, 401) AS i))));

-- A superuser lowers it for the session.
SET claims.max_batch_size = 3;
SHOW claims.max_batch_size;
SELECT claims_begin_update(req(1001, jsonb_build_array(rec('ROUTES', 'lim/1'), rec('ROUTES', 'lim/2'), rec('ROUTES', 'lim/3')))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(1001, :'l');
-- Four creates.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(1001, jsonb_build_array(
    rec('ROUTES', 'lim/4'), rec('ROUTES', 'lim/5'), rec('ROUTES', 'lim/6'), rec('ROUTES', 'lim/7')))));
-- Four destroys.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(1001, '[]', jsonb_build_array(
    bkt('ROUTES', 'lim/1'), bkt('ROUTES', 'lim/2'), bkt('ROUTES', 'lim/3'), bkt('ROUTES', 'lim/4')))));
-- Two and two.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(1001,
    jsonb_build_array(rec('ROUTES', 'lim/4'), rec('ROUTES', 'lim/5')),
    jsonb_build_array(bkt('ROUTES', 'lim/1'), bkt('ROUTES', 'lim/2')))));
-- A replace counts as two: two replaces are four records.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(1001,
    jsonb_build_array(rec('ROUTES', 'lim/1', 2), rec('ROUTES', 'lim/2', 2)),
    jsonb_build_array(bkt('ROUTES', 'lim/1'), bkt('ROUTES', 'lim/2')))));
-- One replace and one destroy are three, which is allowed.
SELECT claims_begin_update(req(1001, jsonb_build_array(rec('ROUTES', 'lim/1', 2)),
    jsonb_build_array(bkt('ROUTES', 'lim/1'), bkt('ROUTES', 'lim/3')))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(1001, :'l');
SELECT status('ROUTES', 'lim/1') AS replaced, status('ROUTES', 'lim/2') AS kept, status('ROUTES', 'lim/3') AS destroyed;
-- The size is refused before anything else is looked at.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(1001, jsonb_build_array(
    rec('ROUTES', 'lim/1'), rec('ROUTES', 'lim/2'), rec('ROUTES', 'lim/8'), rec('ROUTES', 'lim/9')))));
-- Reads are not limited by it.
SELECT jsonb_array_length(claims_list_records('{"cell_id": 1001, "source_type": "RAILS_TABLE_USERS"}') -> 'records') AS listed;

-- SET LOCAL lasts for the transaction only.
RESET claims.max_batch_size;
BEGIN;
SET LOCAL claims.max_batch_size = 1;
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(1001, jsonb_build_array(rec('ROUTES', 'lim/4'), rec('ROUTES', 'lim/5')))));
COMMIT;
SHOW claims.max_batch_size;
SELECT claims_begin_update(req(1001, jsonb_build_array(rec('ROUTES', 'lim/4'), rec('ROUTES', 'lim/5')))) ->> 'cell_id' AS cell;

-- Its range is 1 to 100000; names under claims. are reserved.
SELECT expect_error($$SET claims.max_batch_size = 0$$);
SELECT expect_error($$SET claims.max_batch_size = 100001$$);
SELECT expect_error($$SET claims.max_batch_size = 'many'$$);
SELECT expect_error($$SET claims.no_such_setting = 1$$);
SHOW claims.max_batch_size;

-- Only a superuser may change it; other roles read the tables of
-- registries but not the claims and leases themselves.
CREATE ROLE regress_claims_plain;
SET ROLE regress_claims_plain;
SHOW claims.max_batch_size;
SELECT expect_error($$SET claims.max_batch_size = 5$$);
SELECT expect_error($$SELECT count(*) FROM claims$$);
SELECT expect_error($$SELECT count(*) FROM claim_leases$$);
SELECT expect_error($$INSERT INTO claim_bucket_types (type_id, name) VALUES (40, 'PLAIN_TYPES')$$);
SELECT count(*) > 0 AS reads_registry FROM claim_bucket_types;
-- ...and, being neither a cell, a router nor an administrator, may not call
-- the API at all.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(1001, jsonb_build_array(rec('ROUTES', 'plain/1')))));
SELECT expect_error($$SELECT claims_get_record('{"claim": {"username": "alice"}}')$$);
RESET ROLE;
SHOW claims.max_batch_size;
DROP ROLE regress_claims_plain;
