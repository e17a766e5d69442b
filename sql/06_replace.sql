--
-- Replace: the same value in create_records and destroy_records re-points a
-- claim the cell owns (ACTIVE, unleased) to a new subject and source. The
-- row stays the cell's own (same uuid) throughout; commit applies the new
-- metadata, rollback keeps the old.
--
\set SHOW_CONTEXT never

SELECT claims_begin_update(jsonb_build_object('cell_id', 601, 'create_records', jsonb_build_array(
    rec('USERNAMES', 'r-user', 10, 'RAILS_TABLE_USERS', 10) || '{"user_data": {"v": 1}}',
    rec('USERNAMES', 'r-plain', 10, 'RAILS_TABLE_USERS', 10)))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(601, :'l');
SELECT uuid AS row_uuid FROM claims WHERE bucket_value = 'r-user' \gset
SELECT (scrub(claims_get_record('{"claim": {"username": "r-user"}}')) -> 'record') - 'metadata' AS record,
       (claims_get_record('{"claim": {"username": "r-user"}}') #> '{record,metadata}') - 'claim' - 'bucket' AS metadata;

-- Replace, then roll back: during the lease the value shows LEASE_DESTROYING
-- under the lease with its current metadata; one row, one key in the lease.
SELECT claims_begin_update(jsonb_build_object('cell_id', 601,
    'create_records', jsonb_build_array(rec('USERNAMES', 'r-user', 11, 'RAILS_TABLE_NAMESPACES', 11) || '{"user_data": {"v": 2}}'),
    'destroy_records', jsonb_build_array(bkt('USERNAMES', 'r-user')))) ->> 'lease_uuid' AS lr \gset
SELECT status('USERNAMES', 'r-user');
SELECT r #>> '{record,lease_uuid}' = :'lr' AS under_lease, (r #>> '{record,uuid}')::uuid = :'row_uuid' AS same_row,
       (r #> '{record,metadata}') - 'claim' - 'bucket' AS metadata
FROM claims_get_record('{"claim": {"username": "r-user"}}') AS r;
SELECT count(*) AS rows FROM claims WHERE bucket_value = 'r-user';
SELECT cardinality(claim_types) AS keys FROM claim_leases WHERE uuid = :'lr';
SELECT claims_rollback(601, :'lr');
SELECT status('USERNAMES', 'r-user');
SELECT (r #>> '{record,uuid}')::uuid = :'row_uuid' AS same_row, (r #> '{record,metadata}') - 'claim' - 'bucket' AS metadata
FROM claims_get_record('{"claim": {"username": "r-user"}}') AS r;
SELECT replace_subject_type IS NULL AND replace_subject_id IS NULL AND replace_source_type IS NULL
       AND replace_source_id IS NULL AND replace_user_data IS NULL AS no_pending_replacement
FROM claims WHERE bucket_value = 'r-user';

-- Replace, then commit: the new subject, source and user_data apply to the
-- same row, still owned by cell 601, ACTIVE and unleased.
SELECT claims_begin_update(jsonb_build_object('cell_id', 601,
    'create_records', jsonb_build_array(rec('USERNAMES', 'r-user', 11, 'RAILS_TABLE_NAMESPACES', 11) || '{"user_data": {"v": 2}}'),
    'destroy_records', jsonb_build_array(bkt('USERNAMES', 'r-user')))) ->> 'lease_uuid' AS lc \gset
SELECT claims_commit(601, :'lc');
SELECT status('USERNAMES', 'r-user');
SELECT (r #>> '{record,uuid}')::uuid = :'row_uuid' AS same_row, r #>> '{record,cell_id}' AS cell,
       r #> '{record}' ? 'lease_uuid' AS leased, (r #> '{record,metadata}') - 'claim' - 'bucket' AS metadata
FROM claims_get_record('{"claim": {"username": "r-user"}}') AS r;
SELECT replace_subject_type IS NULL AND replace_source_id IS NULL AND replace_user_data IS NULL AS no_pending_replacement
FROM claims WHERE bucket_value = 'r-user';
-- Committing again changes nothing.
SELECT claims_state() AS s \gset
SELECT claims_commit(601, :'lc');
SELECT claims_state() = :'s' AS unchanged;
-- The claim moved from one source table to the other in list_records.
SELECT jsonb_array_length(claims_list_records('{"cell_id": 601, "source_type": "RAILS_TABLE_USERS"}') -> 'records') AS users,
       jsonb_array_length(claims_list_records('{"cell_id": 601, "source_type": "RAILS_TABLE_NAMESPACES"}') -> 'records') AS namespaces;

-- The new metadata replaces the old as a whole: a create without user_data
-- leaves none. Claim and bucket spellings of the value still pair up.
SELECT claims_begin_update(jsonb_build_object('cell_id', 601,
    'create_records', jsonb_build_array(jsonb_build_object('claim', '{"username": "r-user"}'::jsonb,
        'subject', '{"type": "USER", "id": "12"}'::jsonb, 'source', '{"type": "RAILS_TABLE_USERS", "rails_primary_key_id": "DA=="}'::jsonb)),
    'destroy_records', jsonb_build_array(bkt('USERNAMES', 'r-user')))) ->> 'lease_uuid' AS lc2 \gset
SELECT claims_commit(601, :'lc2');
SELECT (r #>> '{record,uuid}')::uuid = :'row_uuid' AS same_row, (r #> '{record,metadata}') - 'claim' - 'bucket' AS metadata
FROM claims_get_record('{"claim": {"username": "r-user"}}') AS r;

-- A replace needs the cell's own ACTIVE, unleased claim.
-- Unclaimed: P0002.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(601,
    jsonb_build_array(rec('USERNAMES', 'r-nobody')), jsonb_build_array(bkt('USERNAMES', 'r-nobody')))));
-- Another cell's: 42501.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(602,
    jsonb_build_array(rec('USERNAMES', 'r-user')), jsonb_build_array(bkt('USERNAMES', 'r-user')))));
-- The cell's own, still being created or destroyed by another lease: 55P03.
SELECT claims_begin_update(req(601, jsonb_build_array(rec('USERNAMES', 'r-new')), jsonb_build_array(bkt('USERNAMES', 'r-plain')))) ->> 'lease_uuid' AS lo \gset
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(601,
    jsonb_build_array(rec('USERNAMES', 'r-new', 2)), jsonb_build_array(bkt('USERNAMES', 'r-new')))));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(601,
    jsonb_build_array(rec('USERNAMES', 'r-plain', 2)), jsonb_build_array(bkt('USERNAMES', 'r-plain')))));
SELECT claims_rollback(601, :'lo');
-- The create half must be a complete create: 22023.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(601,
    jsonb_build_array(bkt('USERNAMES', 'r-user')), jsonb_build_array(bkt('USERNAMES', 'r-user')))));

-- While a replace is outstanding the value is taken: other cells' creates and
-- the cell's own destroys or replaces wait (55P03).
SELECT claims_begin_update(req(601, jsonb_build_array(rec('USERNAMES', 'r-user', 13)), jsonb_build_array(bkt('USERNAMES', 'r-user')))) ->> 'lease_uuid' AS lp \gset
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(602, jsonb_build_array(rec('USERNAMES', 'r-user')))));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(601, '[]', jsonb_build_array(bkt('USERNAMES', 'r-user')))));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(601,
    jsonb_build_array(rec('USERNAMES', 'r-user', 14)), jsonb_build_array(bkt('USERNAMES', 'r-user')))));
-- ...and another cell trying to destroy it is refused for ownership (42501).
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(602, '[]', jsonb_build_array(bkt('USERNAMES', 'r-user')))));
SELECT claims_commit(601, :'lp');
SELECT claims_get_record('{"claim": {"username": "r-user"}}') #>> '{record,metadata,subject,id}' AS subject_id;

-- Replaces, creates and destroys in one batch, all or nothing.
SELECT claims_begin_update(req(601, jsonb_build_array(rec('EMAILS', 'r@example.com')))) ->> 'lease_uuid' AS le \gset
SELECT claims_commit(601, :'le');
SELECT claims_state() AS s \gset
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(601,
    jsonb_build_array(rec('USERNAMES', 'r-user', 20), rec('ROUTES', 'r/route'), rec('USERNAMES', 'r-missing', 20)),
    jsonb_build_array(bkt('USERNAMES', 'r-user'), bkt('EMAILS', 'r@example.com'), bkt('USERNAMES', 'r-missing')))));
SELECT claims_state() = :'s' AS unchanged;
SELECT claims_begin_update(req(601,
    jsonb_build_array(rec('USERNAMES', 'r-user', 20), rec('ROUTES', 'r/route')),
    jsonb_build_array(bkt('USERNAMES', 'r-user'), bkt('EMAILS', 'r@example.com')))) ->> 'lease_uuid' AS lm \gset
SELECT status('USERNAMES', 'r-user') AS replaced, status('ROUTES', 'r/route') AS created, status('EMAILS', 'r@example.com') AS destroyed;
SELECT cardinality(claim_types) AS keys FROM claim_leases WHERE uuid = :'lm';
SELECT claims_commit(601, :'lm');
SELECT status('USERNAMES', 'r-user') AS replaced, status('ROUTES', 'r/route') AS created, status('EMAILS', 'r@example.com') AS destroyed;
SELECT claims_get_record('{"claim": {"username": "r-user"}}') #>> '{record,metadata,subject,id}' AS subject_id,
       (claims_get_record('{"claim": {"username": "r-user"}}') #>> '{record,uuid}')::uuid = :'row_uuid' AS same_row;
