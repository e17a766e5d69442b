--
-- Basics: the life of a claim through create, commit, destroy and rollback,
-- the shape of every answer, time-ordered identifiers and NULL arguments.
--
\set SHOW_CONTEXT never
SET timezone = 'America/Los_Angeles';

-- The registries are seeded with the claims.v1 enums (bucket type 14 does
-- not exist; UNSPECIFIED is never registered).
SELECT type_id, name, claim_field, integer_valued, aliases FROM claim_bucket_types ORDER BY type_id;
SELECT type_id, name, aliases FROM claim_subject_types ORDER BY type_id;
SELECT type_id, name, aliases FROM claim_source_types ORDER BY type_id;
SELECT count(*) AS claims, (SELECT count(*) FROM claim_leases) AS leases FROM claims;

-- A value nobody claimed: get_record answers SQL NULL.
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "alice"}}') IS NULL AS unclaimed;

-- begin_update answers {"cell_id": "<int64 as string>", "lease_uuid": "<uuid>"}.
SELECT claims_begin_update('{
    "cell_id": 1,
    "create_records": [
        {"bucket": {"type": "USERNAMES", "value": "alice"},
         "subject": {"type": "USER", "id": 42},
         "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 42},
         "user_data": {"note": "first user", "n": [1, 2]}},
        {"bucket": {"type": "EMAILS", "value": "alice@example.com"},
         "subject": {"type": "USER", "id": 42},
         "source": {"type": "RAILS_TABLE_EMAILS", "rails_primary_key_id": 7}}
    ]}') AS answer \gset
SELECT scrub(:'answer');
SELECT :'answer'::jsonb ->> 'lease_uuid' AS lease1 \gset

-- The lease row: outstanding, owned by cell 1, holding both keys, with the
-- full request kept as its payload.
SELECT state, creator_id, cardinality(claim_types) AS nkeys, claim_types,
       finished_at IS NULL AS unfinished, payload -> 'cell_id' AS payload_cell
FROM claim_leases WHERE uuid = :'lease1';
SELECT jsonb_array_length(payload -> 'create_records') AS payload_creates,
       payload #> '{create_records,0,user_data}' AS payload_user_data
FROM claim_leases WHERE uuid = :'lease1';

-- A create is visible to get_record at once, as LEASE_CREATING under the lease.
SELECT jsonb_pretty(scrub(claims_get_record('{"bucket": {"type": "USERNAMES", "value": "alice"}}')));
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "alice"}}') #>> '{record,lease_uuid}' = :'lease1' AS under_lease1;
SELECT status('EMAILS', 'alice@example.com');

-- Commit makes both ACTIVE; the lease is finished.
SELECT claims_commit(1, :'lease1');
SELECT status('USERNAMES', 'alice'), status('EMAILS', 'alice@example.com');
SELECT state, finished_at IS NOT NULL AS finished FROM claim_leases WHERE uuid = :'lease1';

-- The Record in proto3 JSON: enum names, int64 as strings, bytes as standard
-- base64 (integer source id 42 = 8 bytes big-endian), the claim field next to
-- the bucket, user_data as given; no lease_uuid once ACTIVE.
SELECT jsonb_pretty(scrub(claims_get_record('{"claim": {"username": "alice"}}')));
SELECT jsonb_pretty(scrub(claims_get_record('{"claim": {"email": "alice@example.com"}}')));

-- Every field of the Record, with its JSON type.
SELECT k, jsonb_typeof(v) FROM jsonb_each(claims_get_record('{"claim": {"username": "alice"}}') -> 'record') AS e(k, v) ORDER BY k;

-- uuid is the row's, cell_id the creator, timestamps are RFC 3339 in UTC with
-- a Z whatever the session time zone, and equal to the stored values.
SELECT (r #>> '{record,uuid}')::uuid = c.uuid AS uuid_matches,
       r #>> '{record,cell_id}' = c.creator_id::text AS cell_matches,
       (r #>> '{record,created_at}') ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6})?Z$' AS created_utc_z,
       (r #>> '{record,updated_at}') ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6})?Z$' AS updated_utc_z,
       (r #>> '{record,created_at}')::timestamptz = c.created_at AS created_matches,
       (r #>> '{record,updated_at}')::timestamptz = c.updated_at AS updated_matches,
       c.updated_at >= c.created_at AS updated_after_created
FROM claims c, claims_get_record('{"claim": {"username": "alice"}}') AS r
WHERE c.bucket_type = 4 AND c.bucket_value = 'alice';

-- The stored row.
SELECT bucket_type, bucket_value, octet_length(bucket_digest) AS digest_len,
       bucket_digest = sha256('alice'::bytea) AS digest_is_sha256,
       subject_type, subject_id, source_type, encode(source_id, 'hex') AS source_id,
       user_data, creator_id, lease_uuid IS NULL AS unleased, status
FROM claims WHERE bucket_type = 4 AND bucket_value = 'alice';

-- Destroy: only the bucket is needed. The value stays routable as
-- LEASE_DESTROYING until the commit removes it.
SELECT claims_begin_update('{"cell_id": 1, "destroy_records": [{"bucket": {"type": "EMAILS", "value": "alice@example.com"}}]}') ->> 'lease_uuid' AS lease2 \gset
SELECT status('EMAILS', 'alice@example.com');
SELECT claims_get_record('{"claim": {"email": "alice@example.com"}}') #>> '{record,lease_uuid}' = :'lease2' AS under_lease2;
SELECT claims_commit(1, :'lease2');
SELECT status('EMAILS', 'alice@example.com');
SELECT claims_get_record('{"claim": {"email": "alice@example.com"}}') IS NULL AS gone;

-- Rollback of a create releases the value.
SELECT claims_begin_update(req(1, jsonb_build_array(rec('ROUTES', 'alice/project')))) ->> 'lease_uuid' AS lease3 \gset
SELECT status('ROUTES', 'alice/project');
SELECT claims_rollback(1, :'lease3');
SELECT status('ROUTES', 'alice/project');
SELECT state, finished_at IS NOT NULL AS finished FROM claim_leases WHERE uuid = :'lease3';

-- Rollback of a destroy keeps the claim, ACTIVE and unchanged.
-- (alice_row: every column but updated_at, which records the touch.)
SELECT md5((to_jsonb(c) - 'updated_at')::text) AS alice_row FROM claims c WHERE bucket_type = 4 AND bucket_value = 'alice' \gset
SELECT claims_begin_update(req(1, '[]', jsonb_build_array(bkt('USERNAMES', 'alice')))) ->> 'lease_uuid' AS lease4 \gset
SELECT status('USERNAMES', 'alice');
SELECT claims_rollback(1, :'lease4');
SELECT status('USERNAMES', 'alice');
SELECT subject_id, encode(source_id, 'hex') AS source_id, user_data, status,
       lease_uuid IS NULL AS unleased
FROM claims WHERE bucket_type = 4 AND bucket_value = 'alice';
SELECT md5((to_jsonb(c) - 'updated_at')::text) = :'alice_row' AS row_unchanged
FROM claims c WHERE bucket_type = 4 AND bucket_value = 'alice';

-- A value released by a rollback can be claimed by another cell.
SELECT claims_begin_update(req(2, jsonb_build_array(rec('ROUTES', 'alice/project', 5, 'RAILS_TABLE_ROUTES', 5)))) ->> 'lease_uuid' AS lease5 \gset
SELECT claims_commit(2, :'lease5');
SELECT status('ROUTES', 'alice/project');

-- A value released by a committed destroy can be claimed again.
SELECT claims_begin_update(req(2, jsonb_build_array(rec('EMAILS', 'alice@example.com', 9)))) ->> 'lease_uuid' AS lease6 \gset
SELECT claims_commit(2, :'lease6');
SELECT status('EMAILS', 'alice@example.com');

-- Identifiers are version 7 UUIDs (RFC 9562 variant) and successive leases
-- sort in creation order; so do the claim rows a lease creates.
SELECT substr(u, 15, 1) AS version, substr(u, 20, 1) IN ('8', '9', 'a', 'b') AS rfc_variant
FROM (VALUES (:'lease1'), (:'lease2'), (:'lease3'), (:'lease4'), (:'lease5'), (:'lease6')) AS v(u);
SELECT :'lease1'::uuid < :'lease2'::uuid AND :'lease2'::uuid < :'lease3'::uuid
   AND :'lease3'::uuid < :'lease4'::uuid AND :'lease4'::uuid < :'lease5'::uuid
   AND :'lease5'::uuid < :'lease6'::uuid AS leases_in_creation_order;
CREATE TEMP TABLE made (n int, lease uuid);
INSERT INTO made
SELECT i, (claims_begin_update(req(2, jsonb_build_array(rec('GPG_KEYS', 'key-' || i)))) ->> 'lease_uuid')::uuid
FROM generate_series(1, 20) AS i;
SELECT count(*) AS leases,
       bool_and(substr(lease::text, 15, 1) = '7') AS all_v7,
       array_agg(n ORDER BY lease) = array_agg(n ORDER BY n) AS uuid_order_is_creation_order
FROM made;
SELECT bool_and(substr(c.uuid::text, 15, 1) = '7') AS claim_uuids_v7,
       bool_and(c.uuid <> c.lease_uuid) AS distinct_from_lease
FROM claims c JOIN made m ON c.lease_uuid = m.lease;
SELECT count(*) AS rolled_back FROM made m, claims_rollback(2, m.lease) AS r;
SELECT count(*) AS left_over FROM claims WHERE bucket_type = 8;
-- A lease made in a later session sorts after the earlier ones too.
\c
\set SHOW_CONTEXT never
SET timezone = 'America/Los_Angeles';
SELECT claims_begin_update(req(2, jsonb_build_array(rec('GPG_KEYS', 'key-next-session')))) ->> 'lease_uuid' AS lease7 \gset
SELECT :'lease6'::uuid < :'lease7'::uuid AS later_session_sorts_after,
       (SELECT count(*) FROM claim_leases WHERE uuid > :'lease7'::uuid) AS newer_leases;
SELECT claims_rollback(2, :'lease7');

-- NULL arguments raise 22004 in every function.
SELECT expect_error($$SELECT claims_begin_update(NULL)$$);
SELECT expect_error($$SELECT claims_get_record(NULL)$$);
SELECT expect_error($$SELECT claims_list_leases(NULL)$$);
SELECT expect_error($$SELECT claims_list_records(NULL)$$);
SELECT expect_error($$SELECT claims_commit(NULL, '01890a5d-ac96-774b-bcce-b302099a8057')$$);
SELECT expect_error($$SELECT claims_commit(1, NULL)$$);
SELECT expect_error($$SELECT claims_commit(NULL, NULL)$$);
SELECT expect_error($$SELECT claims_rollback(NULL, '01890a5d-ac96-774b-bcce-b302099a8057')$$);
SELECT expect_error($$SELECT claims_rollback(1, NULL)$$);
SELECT expect_error($$SELECT claims_rollback(NULL, NULL)$$);
-- A NULL on a real lease changes nothing either.
SELECT expect_error(format('SELECT claims_commit(NULL, %L)', :'lease1'));
SELECT expect_error(format('SELECT claims_rollback(NULL::bigint, %L)', :'lease1'));

-- Cell ids start at 1, in the functions taking one as an argument too.
SELECT expect_error(format('SELECT claims_commit(0, %L)', :'lease1'));
SELECT expect_error(format('SELECT claims_rollback(-1, %L)', :'lease1'));

-- What the cells hold now.
SELECT creator_id, bucket_type, bucket_value, status FROM claims ORDER BY creator_id, bucket_type, bucket_value;
SELECT creator_id, state, count(*) FROM claim_leases GROUP BY 1, 2 ORDER BY 1, 2;
