-- The statements of the API read claims and claim_leases by key, through
-- their indexes, even when the statistics describe empty tables: their plans
-- are generic and live as long as the backend, so a sequential scan chosen
-- for a new store would grow with the store until the next ANALYZE.
-- pg_stat_xact_user_tables counts the scans of this transaction.
BEGIN;
SELECT plan(6);

CREATE ROLE claims_tap_plans NOLOGIN;
SET LOCAL client_min_messages = warning;   -- "already a member of claims_cell"
SELECT claims_register_cell(1, 'cell-1', 'claims_tap_plans') \g /dev/null
RESET client_min_messages;

-- Statistics of an empty store, as a new store has them.
ANALYZE claims, claim_leases;
SELECT is((SELECT reltuples FROM pg_class WHERE oid = 'claims'::regclass), 0::real,
    'the statistics describe an empty claims table');

-- Every statement of the API, against those statistics.
SELECT claims_begin_update('{"cell_id": 1, "create_records": [
    {"bucket": {"type": "USERNAMES", "value": "plan-a"}, "subject": {"type": "USER", "id": 1},
     "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}},
    {"bucket": {"type": "EMAILS", "value": "plan-a@example.com"}, "subject": {"type": "USER", "id": 1},
     "source": {"type": "RAILS_TABLE_EMAILS", "rails_primary_key_id": 1}}]}') ->> 'lease_uuid' AS l1 \gset
SELECT claims_commit(1, :'l1') \g /dev/null
SELECT claims_begin_update('{"cell_id": 1, "destroy_records": [{"bucket": {"type": "USERNAMES", "value": "plan-a"}}],
    "create_records": [{"bucket": {"type": "USERNAMES", "value": "plan-b"}, "subject": {"type": "USER", "id": 1},
     "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}') ->> 'lease_uuid' AS l2 \gset
SELECT claims_rollback(1, :'l2') \g /dev/null
SELECT throws_ok($$SELECT claims_begin_update('{"cell_id": 1, "destroy_records": [{"bucket": {"type": "USERNAMES", "value": "plan-none"}}]}')$$,
    'P0002', NULL, 'a refused batch is classified (the classifying statement runs)');
SELECT claims_list_leases('{"cell_id": 1}') \g /dev/null
SELECT claims_list_records('{"cell_id": 1, "source_type": "RAILS_TABLE_USERS"}') \g /dev/null
SELECT claims_get_record('{"bucket": {"type": "EMAILS", "value": "plan-a@example.com"}}') \g /dev/null

SELECT is((SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'claims'::regclass), 0::bigint,
    'no statement scanned claims sequentially');
SELECT is((SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'claim_leases'::regclass), 0::bigint,
    'no statement scanned claim_leases sequentially');
SELECT cmp_ok((SELECT idx_scan FROM pg_stat_xact_user_tables WHERE relid = 'claims'::regclass), '>=', 6::bigint,
    'claims was read through its indexes');
SELECT cmp_ok((SELECT idx_scan FROM pg_stat_xact_user_tables WHERE relid = 'claim_leases'::regclass), '>=', 3::bigint,
    'claim_leases was read through its indexes');

SELECT * FROM finish();
ROLLBACK;
