-- The statements of the API read claims and claim_leases by key, through
-- their indexes, even when the statistics describe empty tables: their plans
-- are generic and live as long as the backend, so a plan that scans a whole
-- table (sequentially or along an index), fine for a new store, would cost
-- more per call as the store grows, until the next ANALYZE.
-- pg_stat_xact_user_tables counts the scans and the rows fetched through indexes in
-- this transaction.
BEGIN;
SELECT plan(8);

CREATE ROLE claims_tap_plans NOLOGIN;
SET LOCAL client_min_messages = warning;   -- "already a member of claims_cell"
SELECT claims_register_cell(1, 'cell-1', 'claims_tap_plans') \g /dev/null
RESET client_min_messages;

-- Statistics of an empty store, as a new store has them.
ANALYZE claims, claim_leases;
SELECT is((SELECT reltuples FROM pg_class WHERE oid = 'claims'::regclass), 0::real,
    'the statistics describe an empty claims table');

-- Every statement of the API, planned against those statistics ...
\set create_a '{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", "value": "plan-a"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}, {"bucket": {"type": "EMAILS", "value": "plan-a@example.com"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_EMAILS", "rails_primary_key_id": 1}}]}'
\set replace_a '{"cell_id": 1, "destroy_records": [{"bucket": {"type": "USERNAMES", "value": "plan-a"}}], "create_records": [{"bucket": {"type": "USERNAMES", "value": "plan-b"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}'
SELECT claims_begin_update(:'create_a') ->> 'lease_uuid' AS l1 \gset
SELECT claims_commit(1, :'l1') \g /dev/null
SELECT claims_begin_update(:'replace_a') ->> 'lease_uuid' AS l2 \gset
SELECT claims_rollback(1, :'l2') \g /dev/null
SELECT throws_ok($$SELECT claims_begin_update('{"cell_id": 1, "destroy_records": [{"bucket": {"type": "USERNAMES", "value": "plan-none"}}]}')$$,
    'P0002', NULL, 'a refused batch is classified (the classifying statement runs)');
SELECT claims_list_leases('{"cell_id": 1}') \g /dev/null
SELECT claims_list_records('{"cell_id": 1, "source_type": "RAILS_TABLE_USERS"}') \g /dev/null

-- ... then the store grows (2000 claims and leases of another cell, no
-- ANALYZE) and the same statements run again with their saved plans.
INSERT INTO claim_leases (uuid, creator_id, payload, state, claim_types, claim_digests, finished_at)
SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid, 2, '{}', 'committed',
       '{}', '{}', now()
FROM generate_series(1, 2000) AS i;
INSERT INTO claims (uuid, bucket_type, bucket_value, bucket_digest, subject_type, subject_id,
                    source_type, source_id, creator_id, lease_uuid, status)
SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid, 4, 'bulk-' || i,
       sha256(convert_to('bulk-' || i, 'UTF8')), 4, i, 1, int8send(i), 2, NULL, 'ACTIVE'
FROM generate_series(1, 2000) AS i;
SELECT seq_scan AS seq_before, idx_tup_fetch AS read_before
  FROM pg_stat_xact_user_tables WHERE relid = 'claims'::regclass \gset
SELECT seq_scan AS lseq_before, idx_tup_fetch AS lread_before
  FROM pg_stat_xact_user_tables WHERE relid = 'claim_leases'::regclass \gset

SELECT claims_begin_update(replace(:'create_a', 'plan-a', 'plan-c')::jsonb) ->> 'lease_uuid' AS l3 \gset
SELECT claims_commit(1, :'l3') \g /dev/null
SELECT claims_begin_update(replace(:'replace_a', 'plan-a', 'plan-c')::jsonb) ->> 'lease_uuid' AS l4 \gset
SELECT claims_rollback(1, :'l4') \g /dev/null
SELECT throws_ok($$SELECT claims_begin_update('{"cell_id": 1, "destroy_records": [{"bucket": {"type": "USERNAMES", "value": "plan-none"}}]}')$$,
    'P0002', NULL, 'the refused batch again');
SELECT claims_list_leases('{"cell_id": 1}') \g /dev/null
SELECT claims_list_records('{"cell_id": 1, "source_type": "RAILS_TABLE_USERS"}') \g /dev/null
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "bulk-77"}}') ->> 'record' IS NOT NULL AS found \gset
SELECT ok(:'found', 'a bulk-loaded value is found by its digest');

SELECT is((SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'claims'::regclass), 0::bigint,
    'no statement scanned claims sequentially');
SELECT is((SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'claim_leases'::regclass), 0::bigint,
    'no statement scanned claim_leases sequentially');
SELECT cmp_ok((SELECT idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relid = 'claims'::regclass)
              - :read_before, '<', 100::bigint,
    'the calls fetched a few claims through indexes, not the 2000 of the grown table');
SELECT cmp_ok((SELECT idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relid = 'claim_leases'::regclass)
              - :lread_before, '<', 100::bigint,
    'the calls fetched a few leases through indexes, not the 2000 of the grown table');

SELECT * FROM finish();
ROLLBACK;
