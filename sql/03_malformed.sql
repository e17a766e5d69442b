--
-- Malformed requests: each is refused with 22023 and a message naming the
-- JSON path of the field at fault ("invalid request at $.path: ..."), and
-- writes nothing (expect_error compares row counts and contents of claims
-- and claim_leases before and after every call).
--
\set SHOW_CONTEXT never

-- A value cell 300 holds, so that a malformed batch would otherwise succeed.
SELECT claims_begin_update(req(300, jsonb_build_array(rec('USERNAMES', 'held')))) ->> 'lease_uuid' AS held \gset
SELECT claims_commit(300, :'held');
SELECT count(*) AS claims, (SELECT count(*) FROM claim_leases) AS leases FROM claims \gset before_

-- The request itself.
SELECT expect_error($$SELECT claims_begin_update('[]')$$);
SELECT expect_error($$SELECT claims_begin_update('"cell 1"')$$);
SELECT expect_error($$SELECT claims_begin_update('null')$$);
SELECT expect_error($$SELECT claims_begin_update('{}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [], "destroy_records": []}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [], "color": "red"}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "CellId": 300}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "cellId": 300}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [], "createRecords": []}')$$);

-- cell_id.
SELECT expect_error($$SELECT claims_begin_update('{"create_records": [{"claim": {"username": "m1"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 0, "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": -300, "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": "three", "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": "300 ", "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300.5, "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": true, "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": [300], "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 9223372036854775808, "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": "-9223372036854775809", "destroy_records": [{"claim": {"username": "held"}}]}')$$);

-- lease_uuid.
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "lease_uuid": "not-a-uuid", "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "lease_uuid": "01890a5d-ac96-774b-bcce-b302099a805", "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "lease_uuid": "01890a5dxac96-774b-bcce-b302099a8057", "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "lease_uuid": "01890a5d-ac96-774b-bcce-b302099a805g", "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "lease_uuid": 42, "destroy_records": [{"claim": {"username": "held"}}]}')$$);

-- The record lists.
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": {"claim": {"username": "m1"}}}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": "held"}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"username": "held"}}, 7]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [null]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": null, "claim": null}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"username": "held"}, "owner": 1}]}')$$);

-- The same value twice in one list, however it is spelled.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(300, jsonb_build_array(rec('ROUTES', 'm/1'), rec('EMAILS', 'm1@x'), rec('ROUTES', 'm/1')))));
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"username": "held"}}, {"bucket": {"type": 4, "value": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"projectId": 5}}, {"claim": {"project_id": "5"}}]}')$$);

-- Creates need a subject and a source.
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}}]}')$$);

-- bucket.
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": "USERNAMES/held"}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"value": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": "USERNAMES"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": "USERNAME", "value": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": "usernames", "value": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": "UNSPECIFIED", "value": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": 0, "value": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": 14, "value": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": -4, "value": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": 4.5, "value": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": 4294967300, "value": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": "4", "value": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": true, "value": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": "USERNAMES", "value": 7}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": "USERNAMES", "value": ""}}]}')$$);
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(300, '[]', jsonb_build_array(bkt('SSH_KEYS', repeat('é', 1025))))));
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": "USERNAMES", "value": "held", "lang": "en"}}]}')$$);

-- Integer-valued bucket types take canonical decimal int64 text only.
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": "PROJECT_IDS", "value": "007"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": "USER_IDS", "value": "+5"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": "NAMESPACE_IDS", "value": "-0"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": "SNIPPET_IDS", "value": "12a"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": "ORGANIZATION_IDS", "value": "9223372036854775808"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": "PROJECT_IDS", "value": " 5"}}]}')$$);

-- claim.
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": "held"}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"username": "held", "email": "held@x"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"nickname": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"UserName": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"username": 42}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"username": ""}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"project_id": "five"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"project_id": 5.5}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"userId": true}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"snippet_id": 18446744073709551616}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"username": "held"}, "bucket": {"type": "USERNAMES", "value": "other"}}]}')$$);

-- subject.
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": [4, 1], "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "GROUPS", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": 5, "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "UNSPECIFIED", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER"}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 0}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": "0x10"}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1, "name": "m"}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);

-- source.
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": "users"}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"type": 99, "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": "not base64!"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": "AQIDB"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": "AQ="}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": ""}}]}')$$);
SELECT expect_error(format('SELECT claims_begin_update(%L)', jsonb_build_object('cell_id', 300, 'create_records', jsonb_build_array(jsonb_build_object(
    'claim', '{"username": "m1"}'::jsonb, 'subject', '{"type": "USER", "id": 1}'::jsonb,
    'source', jsonb_build_object('type', 'RAILS_TABLE_USERS', 'rails_primary_key_id', translate(encode(convert_to(repeat('x', 129), 'UTF8'), 'base64'), E'\n', '')))))));
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": false}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1.5}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "id": 1}}]}')$$);

-- user_data must be an object.
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}, "user_data": [1, 2]}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}, "userData": "note"}]}')$$);

-- The path names the field as the client spelled it, at any depth and index.
SELECT expect_error($$SELECT claims_begin_update('{"cellId": 300, "createRecords": [
    {"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "railsPrimaryKeyId": 1}},
    {"claim": {"username": "m2"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "railsPrimaryKeyId": "%%"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"username": "held"}}, {"claim": {"username": "m2"}}, {"claim": {"organizationPath": ""}}]}')$$);
-- Destroy entries may carry a subject or source; what is given is checked.
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"username": "held"}, "subject": {"type": "NOBODY", "id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"username": "held"}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": "!"}}]}')$$);

-- A malformed entry beats every other problem of its batch: here the other
-- entries are already claimed, unclaimed or owned by another cell.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(301,
    jsonb_build_array(rec('USERNAMES', 'held'), rec('ROUTES', 'ok')),
    jsonb_build_array(bkt('USERNAMES', 'held'), bkt('EMAILS', 'never-claimed'), bkt('USER_IDS', '01')))));

-- get_record.
SELECT expect_error($$SELECT claims_get_record('[]')$$);
SELECT expect_error($$SELECT claims_get_record('{}')$$);
SELECT expect_error($$SELECT claims_get_record('{"bucket": null}')$$);
SELECT expect_error($$SELECT claims_get_record('{"cell_id": 300, "claim": {"username": "held"}}')$$);
SELECT expect_error($$SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "held"}, "Bucket": {"type": "USERNAMES", "value": "held"}}')$$);
SELECT expect_error($$SELECT claims_get_record('{"bucket": {"type": "NOPE", "value": "held"}}')$$);
SELECT expect_error($$SELECT claims_get_record('{"claim": {"project_id": "1e3"}}')$$);

-- list_leases.
SELECT expect_error($$SELECT claims_list_leases('[1]')$$);
SELECT expect_error($$SELECT claims_list_leases('{}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 0}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "page_size": 10}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "limit": -1}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "limit": "ten"}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "limit": 2147483648}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "limit": 2.5}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "next": "bm90IGEgdG9rZW4="}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "next": "%%%"}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "next": 12}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "next": {"@type": "type.googleapis.com/google.protobuf.BytesValue"}}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "next": {"@type": "type.googleapis.com/google.protobuf.BytesValue", "value": "AAAA", "extra": 1}}')$$);
-- A 25-byte token of an unknown version.
SELECT expect_error(format('SELECT claims_list_leases(%L)', jsonb_build_object('cell_id', 300, 'next',
    encode('\x02'::bytea || '\x00000000000000000000000000000000000000000000000000'::bytea, 'base64'))));
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "created_after": 1700000000}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "created_after": "2024-01-01"}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "created_after": "2024-01-01T00:00:00"}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "created_after": "2024-01-01 00:00:00Z"}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "created_after": "2024-13-01T00:00:00Z"}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "created_after": "2023-02-29T00:00:00Z"}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "created_after": "2024-01-01T24:00:00Z"}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "created_after": "2024-01-01T00:00:00.Z"}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "created_after": "2024-01-01T00:00:00+0100"}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "created_after": "yesterday"}')$$);

-- list_records.
SELECT expect_error($$SELECT claims_list_records('"records"')$$);
SELECT expect_error($$SELECT claims_list_records('{"source_type": "RAILS_TABLE_USERS"}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 300}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 300, "source_type": "RAILS_TABLE_NOTHING"}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 300, "source_type": 0}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 300, "source_type": 1, "bucket_types": "USERNAMES"}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 300, "source_type": 1, "bucket_types": ["USERNAMES", "NICKNAMES"]}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 300, "source_type": 1, "claimTypes": [4, 0]}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 300, "source_type": 1, "claim_types": [{"username": "x"}]}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 300, "source_type": 1, "source_id_gt": "***"}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 300, "source_type": 1, "sourceIdLte": 5}')$$);
SELECT expect_error(format('SELECT claims_list_records(%L)', jsonb_build_object('cell_id', 300, 'source_type', 1,
    'source_id_gt', translate(encode(convert_to(repeat('x', 129), 'UTF8'), 'base64'), E'\n', ''))));
SELECT expect_error(format('SELECT claims_list_records(%L)', jsonb_build_object('cell_id', 300, 'source_type', 1,
    'source_id_lte', translate(encode(convert_to(repeat('x', 129), 'UTF8'), 'base64'), E'\n', ''))));
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 300, "source_type": 1, "limit": -5}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 300, "source_type": 1, "limit": [10]}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 300, "source_type": 1, "next": "x"}')$$);

-- Nothing of all this reached the tables.
SELECT count(*) = :before_claims AS claims_unchanged,
       (SELECT count(*) FROM claim_leases) = :before_leases AS leases_unchanged
FROM claims;
SELECT count(*) AS cell_301_rows FROM claims WHERE creator_id = 301;
SELECT status('USERNAMES', 'held');
