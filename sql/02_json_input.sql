--
-- Request JSON: the proto3 JSON mapping. Field names in snake_case or
-- lowerCamelCase, enums by name, alias or number, int64 as number or string,
-- bytes as standard or URL-safe base64 with or without padding, integer
-- source ids as 8 bytes big-endian, claim and/or bucket, null as absent.
--
\set SHOW_CONTEXT never

-- lowerCamelCase names at every level, enums by number and by alias, int64
-- as strings, URL-safe unpadded base64, user_data.
SELECT scrub(claims_begin_update('{
    "cellId": "201",
    "createRecords": [
        {"claim": {"organizationPath": "acme"},
         "subject": {"type": 2, "id": "7"},
         "source": {"type": "RAILS_TABLE_GROUPS", "railsPrimaryKeyId": "_-8"},
         "userData": {"camelCase": true}},
        {"bucket": {"type": 3, "value": "acme/old"},
         "subject": {"type": "GROUP", "id": 7},
         "source": {"type": 5, "railsPrimaryKeyId": "-_8"}}
    ],
    "destroyRecords": null,
    "leaseUuid": null}')) AS answer;
SELECT bucket_type, bucket_value, subject_type, subject_id, source_type,
       encode(source_id, 'hex') AS source_id, user_data, creator_id, status
FROM claims WHERE creator_id = 201 ORDER BY bucket_type;
-- Output always uses the enum names and snake_case, whatever the input used.
SELECT scrub(claims_get_record('{"bucket": {"type": "ORGANIZATION_PATH", "value": "acme"}}')) #> '{record,metadata}' AS metadata;
SELECT scrub(claims_get_record('{"claim": {"redirectRoute": "acme/old"}}')) #> '{record,metadata}' AS metadata;

-- Enums: the canonical name, the alias and the number are the same type.
SELECT claims_get_record('{"bucket": {"type": 2, "value": "acme"}}') #>> '{record,metadata,subject,type}' AS by_number,
       claims_get_record('{"bucket": {"type": "ORGANIZATION_PATH", "value": "acme"}}') #>> '{record,metadata,source,type}' AS by_name;
SELECT subject_type, source_type FROM claims WHERE creator_id = 201 AND bucket_type = 3;

-- snake_case with int64 as JSON numbers, standard padded base64.
SELECT claims_begin_update('{
    "cell_id": 202,
    "create_records": [
        {"bucket": {"type": "USERNAMES", "value": "bob"},
         "subject": {"type": "USER", "id": 9223372036854775807},
         "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": "/+8="}},
        {"bucket": {"type": "EMAILS", "value": "bob@example.com"},
         "subject": {"type": "USER", "id": "-9223372036854775808"},
         "source": {"type": "RAILS_TABLE_EMAILS", "rails_primary_key_id": "AQIDBA=="}},
        {"bucket": {"type": "SSH_KEYS", "value": "ssh-ed25519 AAAA"},
         "subject": {"type": "USER", "id": 1.0},
         "source": {"type": "RAILS_TABLE_KEYS", "rails_primary_key_id": "AQIDBA"}},
        {"bucket": {"type": "GPG_KEYS", "value": "gpg-1"},
         "subject": {"type": "USER", "id": 1e2},
         "source": {"type": "RAILS_TABLE_GPG_KEYS", "rails_primary_key_id": "AQIDBAU="}}
    ]}') ->> 'cell_id' AS cell;
SELECT bucket_value, subject_id, encode(source_id, 'hex') AS source_id
FROM claims WHERE creator_id = 202 ORDER BY bucket_type;
-- int64 comes back as a decimal string, bytes as standard padded base64.
SELECT r #>> '{record,metadata,bucket,value}' AS value,
       r #> '{record,metadata,subject,id}' AS subject_id,
       r #> '{record,metadata,source,rails_primary_key_id}' AS source_id
FROM (VALUES ('{"claim": {"username": "bob"}}'::jsonb), ('{"claim": {"email": "bob@example.com"}}'),
             ('{"claim": {"ssh_key": "ssh-ed25519 AAAA"}}'), ('{"claim": {"gpg_key": "gpg-1"}}')) AS q(j),
     claims_get_record(q.j) AS r;

-- Integer rails_primary_key_id: stored as 8 bytes big-endian (two's
-- complement for negatives), returned as their base64.
SELECT claims_begin_update(req(203, jsonb_build_array(
    rec('ROUTES', 'int-0', 1, 'RAILS_TABLE_ROUTES', 0),
    rec('ROUTES', 'int-1', 1, 'RAILS_TABLE_ROUTES', 1),
    rec('ROUTES', 'int-256', 1, 'RAILS_TABLE_ROUTES', 256),
    rec('ROUTES', 'int-minus-1', 1, 'RAILS_TABLE_ROUTES', -1),
    rec('ROUTES', 'int-max', 1, 'RAILS_TABLE_ROUTES', 9223372036854775807)))) ->> 'cell_id' AS cell;
SELECT bucket_value, octet_length(source_id) AS bytes, encode(source_id, 'hex') AS source_id,
       claims_get_record(jsonb_build_object('claim', jsonb_build_object('route', bucket_value)))
           #>> '{record,metadata,source,rails_primary_key_id}' AS as_json
FROM claims WHERE creator_id = 203 ORDER BY source_id;
-- The integer form and its 8-byte base64 name the same source id.
SELECT claims_begin_update('{"cell_id": 203, "create_records": [
    {"claim": {"route": "int-256-b64"}, "subject": {"type": "USER", "id": 1},
     "source": {"type": "RAILS_TABLE_ROUTES", "rails_primary_key_id": "AAAAAAAAAQA="}}]}') ->> 'cell_id' AS cell;
SELECT count(DISTINCT source_id) AS distinct_ids, count(*) AS claims
FROM claims WHERE creator_id = 203 AND bucket_value IN ('int-256', 'int-256-b64');

-- Standard and URL-safe alphabets, padded or not, decode to the same bytes.
SELECT claims_begin_update('{"cell_id": 204, "create_records": [
    {"claim": {"route": "b64-std"}, "subject": {"type": "USER", "id": 1},
     "source": {"type": "RAILS_TABLE_ROUTES", "rails_primary_key_id": "+/+/"}},
    {"claim": {"route": "b64-url"}, "subject": {"type": "USER", "id": 1},
     "source": {"type": "RAILS_TABLE_ROUTES", "rails_primary_key_id": "-_-_"}},
    {"claim": {"route": "b64-std-pad"}, "subject": {"type": "USER", "id": 1},
     "source": {"type": "RAILS_TABLE_ROUTES", "rails_primary_key_id": "+/8="}},
    {"claim": {"route": "b64-url-nopad"}, "subject": {"type": "USER", "id": 1},
     "source": {"type": "RAILS_TABLE_ROUTES", "rails_primary_key_id": "-_8"}},
    {"claim": {"route": "b64-one-byte"}, "subject": {"type": "USER", "id": 1},
     "source": {"type": "RAILS_TABLE_ROUTES", "rails_primary_key_id": "QQ"}}]}') ->> 'cell_id' AS cell;
SELECT bucket_value, encode(source_id, 'hex') AS source_id,
       claims_get_record(jsonb_build_object('claim', jsonb_build_object('route', bucket_value)))
           #>> '{record,metadata,source,rails_primary_key_id}' AS as_json
FROM claims WHERE creator_id = 204 ORDER BY bucket_value;

-- Claim instead of bucket, for every built-in claim field, snake_case and
-- lowerCamelCase; integer-valued fields take a JSON number or a string.
SELECT claims_begin_update(jsonb_build_object('cell_id', 205, 'create_records', jsonb_agg(
    jsonb_build_object('claim', jsonb_build_object(f, v),
                       'subject', '{"type": "PROJECT", "id": 3}'::jsonb,
                       'source', '{"type": "RAILS_TABLE_PROJECTS", "rails_primary_key_id": 3}'::jsonb))))
       ->> 'cell_id' AS cell
FROM (VALUES ('route', '"g/p"'::jsonb), ('organizationPath', '"org"'), ('redirect_route', '"g/old"'),
             ('username', '"carol"'), ('email', '"carol@example.com"'), ('projectId', '3'),
             ('namespace_id', '"4"'), ('gpgKey', '"gpg-carol"'), ('ssh_key', '"ssh-carol"'),
             ('userId', '5'), ('organization_id', '6'), ('serviceDeskCustomEmail', '"desk@example.com"'),
             ('gpg_key_fingerprint', '"ABCD"'), ('sshKeyFingerprint', '"SHA256:x"'), ('snippetId', '"7"'),
             ('pages_domain', '"pages.example.com"'), ('pagesUniqueDomain', '"unique-1"')) AS f(f, v);
SELECT t.name, c.bucket_value,
       claims_get_record(jsonb_build_object('bucket', jsonb_build_object('type', t.name, 'value', c.bucket_value)))
           #> '{record,metadata,claim}' AS claim
FROM claims c JOIN claim_bucket_types t ON t.type_id = c.bucket_type
WHERE c.creator_id = 205 ORDER BY c.bucket_type;

-- Integer-valued: the number 3, the string "3", the bucket value "3" and an
-- integral JSON number like 3.0 all name the same value.
SELECT claims_get_record(q.j) #>> '{record,metadata,bucket,value}' AS value,
       claims_get_record(q.j) #>> '{record,cell_id}' AS cell
FROM (VALUES ('{"claim": {"project_id": 3}}'::jsonb), ('{"claim": {"project_id": "3"}}'),
             ('{"claim": {"projectId": 3.0}}'), ('{"bucket": {"type": "PROJECT_IDS", "value": "3"}}'),
             ('{"bucket": {"type": 6, "value": "3"}}')) AS q(j);

-- Bucket and claim together must agree; then they are one value.
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "carol"}, "claim": {"username": "carol"}}')
       #>> '{record,metadata,bucket,value}' AS both_agree;
SELECT claims_get_record('{"bucket": {"type": "PROJECT_IDS", "value": "3"}, "claim": {"projectId": "3"}}')
       #>> '{record,metadata,bucket,value}' AS both_agree_integer;
SELECT expect_error($$SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "carol"}, "claim": {"username": "dave"}}')$$);
SELECT expect_error($$SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "carol"}, "claim": {"email": "carol"}}')$$);
SELECT expect_error($$SELECT claims_get_record('{"bucket": {"type": "PROJECT_IDS", "value": "3"}, "claim": {"project_id": 4}}')$$);
-- In a batch, the disagreeing entry is refused and nothing is leased.
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 206, "create_records": [
    {"bucket": {"type": "USERNAMES", "value": "erin"}, "claim": {"username": "erin"},
     "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}},
    {"bucket": {"type": "USERNAMES", "value": "frank"}, "claim": {"username": "frankie"},
     "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
-- Agreeing bucket and claim in a create.
SELECT claims_begin_update('{"cell_id": 206, "create_records": [
    {"bucket": {"type": "USERNAMES", "value": "erin"}, "claim": {"username": "erin"},
     "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')
    ->> 'cell_id' AS cell;
SELECT status('USERNAMES', 'erin');

-- JSON null is the default value, i.e. absent.
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "erin"}, "claim": null}') #>> '{record,cell_id}' AS claim_null;
SELECT claims_get_record('{"bucket": null, "claim": {"username": "erin"}}') #>> '{record,cell_id}' AS bucket_null;
SELECT claims_begin_update('{"cell_id": 207, "lease_uuid": null, "destroy_records": null,
    "create_records": [{"claim": {"username": "gina"}, "bucket": null, "user_data": null,
        "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')
    ->> 'cell_id' AS cell;
SELECT user_data IS NULL AS no_user_data, claims_get_record('{"claim": {"username": "gina"}}') #> '{record,metadata}' ? 'user_data' AS user_data_in_output
FROM claims WHERE creator_id = 207;
-- Inside a claim too: a field given as null is absent, so the claim below
-- holds one field (username) and names erin's value; a claim whose only
-- field is null holds none.
SELECT claims_get_record('{"claim": {"username": "erin", "email": null}}') #>> '{record,cell_id}' AS claim_with_null_field;
SELECT claims_get_record('{"claim": {"projectId": null, "username": "erin"}}') #>> '{record,cell_id}' AS claim_with_null_field_first;
SELECT expect_error($$SELECT claims_get_record('{"claim": {"username": null}}')$$);
-- A required field given as null is missing.
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": null, "create_records": [{"claim": {"username": "hal"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 207, "create_records": [{"claim": {"username": "hal"}, "subject": null, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 207, "create_records": [{"claim": {"username": "hal"}, "subject": {"type": "USER", "id": null}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 207, "create_records": null}')$$);

-- Destroys need only the value, by claim or bucket; lowerCamelCase too.
SELECT claims_commit(207, (SELECT uuid FROM claim_leases WHERE creator_id = 207));
SELECT claims_begin_update('{"cellId": 207, "destroyRecords": [{"claim": {"username": "gina"}}]}') ->> 'cell_id' AS cell;
SELECT status('USERNAMES', 'gina');

-- Values are compared exactly: case, spaces and Unicode are significant.
SELECT claims_begin_update(req(208, jsonb_build_array(rec('USERNAMES', 'Zoë'), rec('USERNAMES', 'zoë'),
       rec('USERNAMES', 'zoe'), rec('USERNAMES', ' zoe'), rec('USERNAMES', 'zoe ')))) ->> 'cell_id' AS cell;
SELECT count(*) AS distinct_values FROM claims WHERE creator_id = 208;
SELECT status('USERNAMES', 'Zoë') AS "Zoë", status('USERNAMES', 'ZOË') AS "ZOË", status('USERNAMES', 'zoe ') AS "zoe+space";
-- Values up to 1024 characters (not bytes) are accepted.
SELECT claims_begin_update(req(208, jsonb_build_array(rec('SSH_KEYS', repeat('é', 1024)), rec('GPG_KEYS', repeat('k', 1024))))) ->> 'cell_id' AS cell;
SELECT bucket_type, length(bucket_value) AS chars, octet_length(bucket_value) AS bytes
FROM claims WHERE creator_id = 208 AND bucket_type IN (8, 9) ORDER BY bucket_type;
SELECT claims_get_record(jsonb_build_object('claim', jsonb_build_object('sshKey', repeat('é', 1024)))) #>> '{record,cell_id}' AS cell;

-- user_data is kept as given (any JSON object) and returned unchanged.
SELECT claims_begin_update(jsonb_build_object('cell_id', 209, 'create_records', jsonb_build_array(
    rec('USERNAMES', 'ivy') || jsonb_build_object('user_data',
        '{"@type": "type.googleapis.com/x.y", "nested": {"a": [1, "two", null, true]}, "n": 1.5}'::jsonb)))) ->> 'cell_id' AS cell;
SELECT claims_get_record('{"claim": {"username": "ivy"}}') #> '{record,metadata,user_data}' AS user_data;
