--
-- Hardening: how error messages echo the client's request text, and the
-- built-in registry rows that cannot change.
--
-- A message quotes at most 64 bytes of one piece of request text (a string
-- value, a type name, a member name in the path), cut on a character
-- boundary and followed by "..." when cut. A cut inside a multibyte
-- character would make the message invalid in the database encoding: a
-- client using another encoding would then get 22021 from the conversion of
-- the message instead of the 22023 it documents. Numbers are shown without
-- expanding their exponent. This file builds its non-ASCII text with chr()
-- so that it reads the same under every client_encoding.
--
\set SHOW_CONTEXT never

-- Where the cut falls inside a character (an e-acute, two bytes in UTF-8,
-- at bytes 64 and 65) the whole character is left out; where it ends at
-- byte 64 it is kept.
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    jsonb_build_object('cell_id', repeat('1', 63) || chr(233) || '1')));
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    jsonb_build_object('cell_id', repeat('1', 62) || chr(233) || '1')));
-- Text of at most 64 bytes is quoted whole.
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    jsonb_build_object('cell_id', repeat('1', 61) || chr(233) || '1')));

-- Every place that quotes request text: a decimal int64 string, a type name,
-- a UUID, a timestamp, the value of an integer-valued bucket type, and
-- member names in the path.
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    jsonb_build_object('cell_id', 300, 'destroy_records', jsonb_build_array(jsonb_build_object(
        'subject', jsonb_build_object('type', 'USER', 'id', repeat('7', 63) || chr(233)),
        'bucket', jsonb_build_object('type', 'USERNAMES', 'value', 'held'))))));
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    req(300, '[]', jsonb_build_array(bkt(repeat('A', 63) || chr(201), 'held')))));
SELECT expect_error(format('SELECT claims_list_records(%L)',
    jsonb_build_object('cell_id', 300, 'source_type', repeat('S', 63) || chr(201) || repeat('S', 1000))));
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    jsonb_build_object('cell_id', 300, 'lease_uuid', repeat('0', 63) || chr(233) || repeat('0', 36),
                       'destroy_records', jsonb_build_array(bkt('USERNAMES', 'held')))));
SELECT expect_error(format('SELECT claims_list_leases(%L)',
    jsonb_build_object('cell_id', 300, 'created_after', '2026-01-01T00:00:00' || repeat('0', 44) || chr(233) || 'Z')));
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    req(300, '[]', jsonb_build_array(bkt('PROJECT_IDS', repeat('4', 63) || chr(233))))));
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    jsonb_build_object('cell_id', 300, repeat('k', 63) || chr(233), 1)));
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    req(300, '[]', jsonb_build_array(jsonb_build_object('claim',
        jsonb_build_object(repeat('f', 63) || chr(233) || 'x', 'held'))))));
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    req(300, '[]', jsonb_build_array(jsonb_build_object('bucket',
        jsonb_build_object('type', 'USERNAMES', 'value', 'held', repeat('v', 70), 1))))));

-- Under client encodings other than UTF8 the message reaches the client
-- converted; it must still be the 22023 the API documents, in full.
SET client_encoding = 'LATIN1';
SELECT claims_begin_update(jsonb_build_object('cell_id', repeat('1', 63) || chr(233) || '1'));
\echo :LAST_ERROR_SQLSTATE
SELECT claims_begin_update(jsonb_build_object('cell_id', 300, repeat('k', 63) || chr(233), 1));
\echo :LAST_ERROR_SQLSTATE
SELECT claims_begin_update(req(300, '[]', jsonb_build_array(bkt(repeat('A', 63) || chr(201), 'held'))));
\echo :LAST_ERROR_SQLSTATE
SELECT claims_begin_update(req(300, '[]', jsonb_build_array(bkt('PROJECT_IDS', repeat('4', 63) || chr(233)))));
\echo :LAST_ERROR_SQLSTATE
SET client_encoding = 'WIN1252';
SELECT claims_list_leases(jsonb_build_object('cell_id', 300,
    'created_after', '2026-01-01T00:00:00' || repeat('0', 44) || chr(233) || 'Z'));
\echo :LAST_ERROR_SQLSTATE
-- SQL_ASCII is not converted: the bytes arrive as they are, now whole.
SET client_encoding = 'SQL_ASCII';
SELECT claims_begin_update(jsonb_build_object('cell_id', repeat('1', 63) || chr(233) || '1'));
\echo :LAST_ERROR_SQLSTATE
RESET client_encoding;

-- Long request text is quoted only in part.
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    jsonb_build_object('cell_id', repeat('9', 100000))));
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    jsonb_build_object('cell_id', 300, repeat('x', 100000), 1)));
SELECT expect_error(format('SELECT claims_get_record(%L)',
    jsonb_build_object('bucket', jsonb_build_object('type', repeat('T', 100000), 'value', 'x'))));

-- A short JSON number with a large exponent is named in scientific notation,
-- never expanded: wherever the API reads an integer.
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 1e100000, "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": -1e100000, "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 1.25e100000, "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 1e-16383, "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1e100000}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "create_records": [{"claim": {"username": "m1"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1e100000}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"claim": {"project_id": 1e100000}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300, "destroy_records": [{"bucket": {"type": 1e100000, "value": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 300, "limit": 1e100000}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 300, "source_type": "RAILS_TABLE_USERS", "limit": -1e100000}')$$);
-- Numbers of ordinary size read as before: whole when integral, named in
-- full when they are not, or are out of range.
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 300.5, "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 1e-3, "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 9223372036854775808, "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": -9223372036854775809.000, "destroy_records": [{"claim": {"username": "held"}}]}')$$);
SELECT expect_error($$SELECT claims_begin_update('{"cell_id": 3.0e2, "destroy_records": [{"claim": {"project_id": 5.000}}]}')$$);
SELECT claims_list_leases('{"cell_id": 1.2e3, "limit": 1.0e1}') AS integral_numbers;

-- Built-in registry rows cannot change (42501). pg_dump keeps only the rows
-- an operator added (WHERE NOT builtin) and CREATE EXTENSION recreates the
-- built-in ones as shipped, so a change to a built-in row would be lost by
-- a dump and restore. Every refused statement leaves the registries as they
-- were.
CREATE FUNCTION registry_state() RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT md5(coalesce((SELECT string_agg(t::text, '|' ORDER BY t.type_id) FROM claim_bucket_types t), '')
               || '#' || coalesce((SELECT string_agg(t::text, '|' ORDER BY t.type_id) FROM claim_subject_types t), '')
               || '#' || coalesce((SELECT string_agg(t::text, '|' ORDER BY t.type_id) FROM claim_source_types t), ''))
$$;
SELECT registry_state() AS registries \gset
-- An alias added to a built-in type, and other changes to built-in rows.
SELECT expect_error($$UPDATE claim_bucket_types SET aliases = '{USERNAME}' WHERE name = 'USERNAMES'$$);
SELECT expect_error($$UPDATE claim_subject_types SET aliases = aliases || '{TEAM}' WHERE type_id = 2$$);
SELECT expect_error($$UPDATE claim_source_types SET name = 'RAILS_TABLE_ACCOUNTS' WHERE type_id = 1$$);
SELECT expect_error($$UPDATE claim_bucket_types SET builtin = false WHERE type_id = 9$$);
-- A row added as built-in, or an operator's row made built-in.
SELECT expect_error($$INSERT INTO claim_bucket_types (type_id, name, claim_field, builtin) VALUES (50, 'GADGET_NAMES', 'gadget_name', true)$$);
SELECT expect_error($$INSERT INTO claim_subject_types (type_id, name, builtin) VALUES (50, 'ROBOT', true)$$);
SELECT expect_error($$UPDATE claim_source_types SET builtin = true WHERE name = 'RAILS_TABLE_WIKIS'$$);
-- Deleting a built-in row, alone or with others; TRUNCATE.
SELECT expect_error($$DELETE FROM claim_source_types WHERE name = 'RAILS_TABLE_KEYS'$$);
SELECT expect_error($$DELETE FROM claim_subject_types$$);
SELECT expect_error($$TRUNCATE claim_bucket_types$$);
SELECT expect_error($$TRUNCATE claim_subject_types, claim_source_types$$);
SELECT registry_state() = :'registries' AS registries_unchanged;
-- The API knows the built-in types as shipped.
SELECT expect_error($$SELECT claims_get_record('{"bucket": {"type": "USERNAME", "value": "x"}}')$$);
SELECT claims_list_records('{"cell_id": 1200, "source_type": "RAILS_TABLE_GROUPS"}') AS seeded_alias_works;

-- Rows an operator added stay the operator's: added, given an alias,
-- renamed and deleted as before.
INSERT INTO claim_bucket_types (type_id, name, claim_field) VALUES (50, 'GADGET_NAMES', 'gadget_name');
UPDATE claim_bucket_types SET aliases = '{GADGETS}' WHERE type_id = 50;
SELECT claims_get_record('{"bucket": {"type": "GADGETS", "value": "x"}}') IS NULL AS alias_works;
UPDATE claim_bucket_types SET name = 'GADGET_LABELS', builtin = false WHERE type_id = 50;
SELECT type_id, name, claim_field, aliases, builtin FROM claim_bucket_types WHERE type_id = 50;
DELETE FROM claim_bucket_types WHERE type_id = 50;
SELECT registry_state() = :'registries' AS registries_as_before;
DROP FUNCTION registry_state();
