--
-- Finishing leases and retrying calls: commit and rollback are repeatable,
-- the other way round fails loudly (55000), unknown leases are P0002, other
-- cells' leases 42501; begin_update retried with the same lease_uuid.
--
\set SHOW_CONTEXT never

-- Commit twice (and a third time): the repeats succeed and change nothing.
SELECT claims_begin_update(req(501, jsonb_build_array(rec('USERNAMES', 'f-commit')))) ->> 'lease_uuid' AS lc \gset
SELECT claims_commit(501, :'lc');
SELECT claims_state() AS s \gset
SELECT claims_commit(501, :'lc');
SELECT claims_commit(501, :'lc');
SELECT claims_state() = :'s' AS unchanged, status('USERNAMES', 'f-commit');
-- Rolling back a committed lease: 55000, the claim stays.
SELECT expect_error(format('SELECT claims_rollback(501, %L)', :'lc'), :'lc', 'lc');
SELECT status('USERNAMES', 'f-commit'), (SELECT state FROM claim_leases WHERE uuid = :'lc');

-- Rollback twice: the repeat succeeds and changes nothing.
SELECT claims_begin_update(req(501, jsonb_build_array(rec('USERNAMES', 'f-rollback')), jsonb_build_array(bkt('USERNAMES', 'f-commit')))) ->> 'lease_uuid' AS lr \gset
SELECT status('USERNAMES', 'f-rollback') AS created, status('USERNAMES', 'f-commit') AS destroyed;
SELECT claims_rollback(501, :'lr');
SELECT claims_state() AS s \gset
SELECT claims_rollback(501, :'lr');
SELECT claims_state() = :'s' AS unchanged, status('USERNAMES', 'f-rollback') AS created, status('USERNAMES', 'f-commit') AS destroyed;
-- Committing a rolled-back lease: 55000 with DETAIL and HINT, nothing comes back.
SELECT expect_error(format('SELECT claims_commit(501, %L)', :'lr'), :'lr', 'lr');
SELECT status('USERNAMES', 'f-rollback') AS created, status('USERNAMES', 'f-commit') AS destroyed,
       (SELECT state FROM claim_leases WHERE uuid = :'lr');
-- ...even after another cell claimed the released value meanwhile.
SELECT claims_begin_update(req(502, jsonb_build_array(rec('USERNAMES', 'f-rollback')))) ->> 'lease_uuid' AS l502 \gset
SELECT expect_error(format('SELECT claims_commit(501, %L)', :'lr'), :'lr', 'lr');
SELECT status('USERNAMES', 'f-rollback');

-- Unknown lease: P0002 for both.
SELECT expect_error($$SELECT claims_commit(501, '00000000-0000-7000-8000-000000000000')$$);
SELECT expect_error($$SELECT claims_rollback(501, '00000000-0000-7000-8000-000000000000')$$);
-- The uuid of a claim is not a lease.
SELECT uuid AS claim_uuid FROM claims WHERE bucket_value = 'f-commit' \gset
SELECT expect_error(format('SELECT claims_commit(501, %L)', :'claim_uuid'), :'claim_uuid', 'claim_uuid');

-- Another cell's lease: 42501 for both, outstanding or finished, and the
-- lease is left as it was.
SELECT expect_error(format('SELECT claims_commit(501, %L)', :'l502'), :'l502', 'l502');
SELECT expect_error(format('SELECT claims_rollback(501, %L)', :'l502'), :'l502', 'l502');
SELECT expect_error(format('SELECT claims_commit(502, %L)', :'lc'), :'lc', 'lc');
SELECT expect_error(format('SELECT claims_rollback(502, %L)', :'lr'), :'lr', 'lr');
SELECT status('USERNAMES', 'f-rollback'), (SELECT state FROM claim_leases WHERE uuid = :'l502');
-- Repeating the finished rollback of cell 501 leaves cell 502's new claim
-- of the same value alone, outstanding or committed.
SELECT claims_rollback(501, :'lr');
SELECT status('USERNAMES', 'f-rollback');
SELECT claims_commit(502, :'l502');
SELECT claims_rollback(501, :'lr');
SELECT status('USERNAMES', 'f-rollback');
-- Likewise a repeated commit of a destroy after the value was claimed anew.
SELECT claims_begin_update(req(501, jsonb_build_array(rec('USERNAMES', 'f-gone')))) ->> 'lease_uuid' AS lg1 \gset
SELECT claims_commit(501, :'lg1');
SELECT claims_begin_update(req(501, '[]', jsonb_build_array(bkt('USERNAMES', 'f-gone')))) ->> 'lease_uuid' AS lg2 \gset
SELECT claims_commit(501, :'lg2');
SELECT claims_begin_update(req(502, jsonb_build_array(rec('USERNAMES', 'f-gone', 2)))) ->> 'lease_uuid' AS lg3 \gset
SELECT claims_state() AS s \gset
SELECT claims_commit(501, :'lg2');
SELECT claims_commit(501, :'lg1');
SELECT claims_state() = :'s' AS unchanged, status('USERNAMES', 'f-gone');
SELECT claims_commit(502, :'lg3');
SELECT claims_commit(501, :'lg2');
SELECT status('USERNAMES', 'f-gone');

-- begin_update with a client-chosen lease_uuid, retried.
SELECT jsonb_build_object('cell_id', 501, 'lease_uuid', '018f0000-0000-7000-8000-000000000501',
                          'create_records', jsonb_build_array(rec('USERNAMES', 'f-retry'), rec('EMAILS', 'f-retry@example.com')),
                          'destroy_records', jsonb_build_array(bkt('USERNAMES', 'f-commit'))) AS rq \gset
SELECT claims_begin_update(:'rq') AS first_answer;
SELECT count(*) AS claims, (SELECT count(*) FROM claim_leases) AS leases, claims_state() AS s FROM claims \gset before_
-- The identical request again: the same answer, nothing written.
SELECT claims_begin_update(:'rq') AS retry_answer;
SELECT count(*) = :before_claims AS same_claims, (SELECT count(*) FROM claim_leases) = :before_leases AS same_leases,
       claims_state() = :'before_s' AS unchanged
FROM claims;
-- Identical as JSON even when spelled with another member order and spacing.
SELECT claims_begin_update('{"destroy_records": [{"bucket": {"value": "f-commit", "type": "USERNAMES"}}],
    "lease_uuid": "018f0000-0000-7000-8000-000000000501",
    "create_records": [
        {"source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}, "subject": {"id": 1, "type": "USER"},
         "bucket": {"value": "f-retry", "type": "USERNAMES"}},
        {"bucket": {"type": "EMAILS", "value": "f-retry@example.com"}, "subject": {"type": "USER", "id": 1},
         "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}],
    "cell_id": 501}') AS reordered_answer;
SELECT claims_state() = :'before_s' AS unchanged;
-- A different request under the same lease_uuid: 22023.
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    jsonb_set(:'rq'::jsonb, '{create_records,0,bucket,value}', '"f-other"')));
SELECT expect_error(format('SELECT claims_begin_update(%L)', :'rq'::jsonb - 'destroy_records'));
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    jsonb_set(:'rq'::jsonb, '{create_records,1,user_data}', '{"x": 1}')));
-- The same request from another cell: 42501.
SELECT expect_error(format('SELECT claims_begin_update(%L)', jsonb_set(:'rq'::jsonb, '{cell_id}', '502')));
-- After the commit a retry still gets the same answer and changes nothing.
SELECT claims_commit(501, '018f0000-0000-7000-8000-000000000501');
SELECT claims_state() AS s \gset
SELECT claims_begin_update(:'rq') AS after_commit_answer;
SELECT claims_state() = :'s' AS unchanged, status('USERNAMES', 'f-retry'), status('USERNAMES', 'f-commit'),
       (SELECT state FROM claim_leases WHERE uuid = '018f0000-0000-7000-8000-000000000501');

-- After a rollback a retry gets the same answer and does not lease again.
SELECT jsonb_build_object('cell_id', 501, 'lease_uuid', '018f0000-0000-7000-8000-000000000502',
                          'create_records', jsonb_build_array(rec('ROUTES', 'f/retry'))) AS rq2 \gset
SELECT claims_begin_update(:'rq2') ->> 'lease_uuid' AS l;
SELECT claims_rollback(501, '018f0000-0000-7000-8000-000000000502');
SELECT claims_state() AS s \gset
SELECT claims_begin_update(:'rq2') AS after_rollback_answer;
SELECT claims_state() = :'s' AS unchanged, status('ROUTES', 'f/retry'),
       (SELECT state FROM claim_leases WHERE uuid = '018f0000-0000-7000-8000-000000000502');

-- A begin_update that failed left no lease, so its lease_uuid is still free:
-- the retry after the conflict clears goes through.
SELECT claims_begin_update(req(502, jsonb_build_array(rec('ROUTES', 'f/busy')))) ->> 'lease_uuid' AS lbusy \gset
SELECT jsonb_build_object('cell_id', 501, 'lease_uuid', '018f0000-0000-7000-8000-000000000503',
                          'create_records', jsonb_build_array(rec('ROUTES', 'f/busy'))) AS rq3 \gset
SELECT expect_error(format('SELECT claims_begin_update(%L)', :'rq3'));
SELECT count(*) AS lease_rows FROM claim_leases WHERE uuid = '018f0000-0000-7000-8000-000000000503';
SELECT claims_rollback(502, :'lbusy');
SELECT claims_begin_update(:'rq3') AS answer;
SELECT status('ROUTES', 'f/busy');

-- The answer always carries the lease uuid in canonical lower case.
SELECT claims_begin_update('{"cell_id": 501, "lease_uuid": "018F0000-0000-7000-8000-0000000005AB",
    "create_records": [{"claim": {"route": "f/upper"}, "subject": {"type": "USER", "id": 1},
                        "source": {"type": "RAILS_TABLE_ROUTES", "rails_primary_key_id": 1}}]}') AS answer;
SELECT claims_commit(501, '018f0000-0000-7000-8000-0000000005ab');
SELECT status('ROUTES', 'f/upper');

-- Leases of this file and their states.
SELECT creator_id, state, count(*) FROM claim_leases WHERE creator_id IN (501, 502) GROUP BY 1, 2 ORDER BY 1, 2;
