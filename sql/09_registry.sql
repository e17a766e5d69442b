--
-- Registries: an operator adds or changes bucket, subject and source types
-- with plain SQL; the change is usable at once, in the same session and in
-- new ones.
--
\set SHOW_CONTEXT never

-- Load the registries in this session before changing them.
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "reg-nobody"}}') IS NULL AS unclaimed;
SELECT expect_error($$SELECT claims_get_record('{"bucket": {"type": "WIKI_SLUGS", "value": "home"}}')$$);
SELECT expect_error($$SELECT claims_get_record('{"claim": {"wiki_slug": "home"}}')$$);

-- A new bucket type with a claim field: usable in this very session, by
-- name, number and claim field (both spellings), and named in the output.
INSERT INTO claim_bucket_types (type_id, name, claim_field) VALUES (19, 'WIKI_SLUGS', 'wiki_slug');
SELECT type_id, name, claim_field, integer_valued, aliases, builtin FROM claim_bucket_types WHERE type_id = 19;
SELECT claims_begin_update(req(901, jsonb_build_array(rec('WIKI_SLUGS', 'home')))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(901, :'l');
SELECT (claims_get_record('{"bucket": {"type": 19, "value": "home"}}') #> '{record,metadata}') - 'source' - 'subject' AS by_number;
SELECT claims_get_record('{"claim": {"wikiSlug": "home"}}') #>> '{record,cell_id}' AS by_camel_claim,
       claims_get_record('{"claim": {"wiki_slug": "home"}, "bucket": {"type": "WIKI_SLUGS", "value": "home"}}') #>> '{record,cell_id}' AS by_both;
SELECT records_of(claims_list_records('{"cell_id": 901, "source_type": "RAILS_TABLE_USERS", "bucket_types": ["WIKI_SLUGS"]}')) AS listed;
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(902, jsonb_build_array(rec('WIKI_SLUGS', 'home')))));

-- A new session sees it too.
\c
\set SHOW_CONTEXT never
SELECT claims_get_record('{"claim": {"wiki_slug": "home"}}') #>> '{record,metadata,bucket,type}' AS new_session;

-- An UPDATE adding an alias: the alias works at once; output keeps the name.
UPDATE claim_bucket_types SET aliases = '{WIKIS}' WHERE type_id = 19;
SELECT claims_get_record('{"bucket": {"type": "WIKIS", "value": "home"}}') #> '{record,metadata,bucket}' AS by_alias;
SELECT claims_begin_update(jsonb_build_object('cell_id', 901, 'create_records', jsonb_build_array(
    jsonb_build_object('bucket', '{"type": "WIKIS", "value": "about"}'::jsonb, 'subject', '{"type": "USER", "id": 1}'::jsonb,
                       'source', '{"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 2}'::jsonb)))) ->> 'lease_uuid' AS l \gset
SELECT claims_commit(901, :'l');
SELECT records_of(claims_list_records('{"cell_id": 901, "source_type": 1, "claim_types": ["WIKIS"]}')) AS listed;
\c
\set SHOW_CONTEXT never
SELECT claims_get_record('{"bucket": {"type": "WIKIS", "value": "about"}}') #>> '{record,metadata,bucket,type}' AS alias_in_new_session;

-- New subject and source types (with an alias), and an integer-valued bucket
-- type without a claim field.
INSERT INTO claim_subject_types (type_id, name) VALUES (9, 'BOT');
INSERT INTO claim_source_types (type_id, name, aliases) VALUES (20, 'RAILS_TABLE_WIKIS', '{RAILS_TABLE_WIKI_PAGES}');
INSERT INTO claim_bucket_types (type_id, name, integer_valued) VALUES (20, 'WIKI_IDS', true);
SELECT claims_begin_update('{"cell_id": 901, "create_records": [
    {"bucket": {"type": "WIKI_IDS", "value": "77"}, "subject": {"type": "BOT", "id": 5},
     "source": {"type": "RAILS_TABLE_WIKI_PAGES", "rails_primary_key_id": 77}},
    {"bucket": {"type": "WIKI_SLUGS", "value": "bots"}, "subject": {"type": 9, "id": 5},
     "source": {"type": 20, "rails_primary_key_id": 78}}]}') ->> 'lease_uuid' AS l \gset
SELECT claims_commit(901, :'l');
-- Output names the new types; a type without a claim field has no "claim".
SELECT (claims_get_record('{"bucket": {"type": "WIKI_IDS", "value": "77"}}') #> '{record,metadata}') AS metadata;
SELECT records_of(claims_list_records('{"cell_id": 901, "source_type": "RAILS_TABLE_WIKIS"}')) AS listed;
-- Integer-valued: canonical decimal only. No claim field: no claim for it.
SELECT expect_error($$SELECT claims_get_record('{"bucket": {"type": "WIKI_IDS", "value": "077"}}')$$);
SELECT expect_error($$SELECT claims_get_record('{"claim": {"wiki_id": 77}}')$$);

-- A change rolled back is forgotten, in the session that made it too.
BEGIN;
INSERT INTO claim_bucket_types (type_id, name, claim_field) VALUES (21, 'TEMP_TYPES', 'temp_type');
SELECT claims_get_record('{"claim": {"temp_type": "x"}}') IS NULL AS usable_inside;
ROLLBACK;
SELECT expect_error($$SELECT claims_get_record('{"claim": {"temp_type": "x"}}')$$);
SELECT expect_error($$SELECT claims_get_record('{"bucket": {"type": 21, "value": "x"}}')$$);

-- A rename shows in the output at once; the old name is no longer known.
UPDATE claim_bucket_types SET name = 'WIKI_PAGE_SLUGS', claim_field = 'wiki_page_slug' WHERE type_id = 19;
SELECT claims_get_record('{"bucket": {"type": 19, "value": "home"}}') #> '{record,metadata,bucket}' AS bucket,
       claims_get_record('{"bucket": {"type": 19, "value": "home"}}') #> '{record,metadata,claim}' AS claim;
SELECT claims_get_record('{"bucket": {"type": "WIKIS", "value": "home"}}') #>> '{record,metadata,bucket,type}' AS alias_still_works;
SELECT expect_error($$SELECT claims_get_record('{"bucket": {"type": "WIKI_SLUGS", "value": "home"}}')$$);
SELECT expect_error($$SELECT claims_get_record('{"claim": {"wiki_slug": "home"}}')$$);

-- A type deleted while claims of it exist: those records show the number,
-- and the type can no longer be named in requests. Restoring it restores
-- the name.
DELETE FROM claim_bucket_types WHERE type_id = 20;
SELECT records_of(claims_list_records('{"cell_id": 901, "source_type": "RAILS_TABLE_WIKIS"}')) AS listed;
SELECT claims_list_records('{"cell_id": 901, "source_type": "RAILS_TABLE_WIKIS"}') #> '{records,0,metadata,bucket}' AS bucket;
SELECT expect_error($$SELECT claims_get_record('{"bucket": {"type": 20, "value": "77"}}')$$);
INSERT INTO claim_bucket_types (type_id, name, integer_valued) VALUES (20, 'WIKI_IDS', true);
SELECT records_of(claims_list_records('{"cell_id": 901, "source_type": "RAILS_TABLE_WIKIS"}')) AS listed;

-- The registry tables guard their contents: number 0 (UNSPECIFIED) is never
-- registered, names are upper-case identifiers, numbers, names and claim
-- fields are unique.
SELECT expect_error($$INSERT INTO claim_bucket_types (type_id, name) VALUES (0, 'ZERO')$$);
SELECT expect_error($$INSERT INTO claim_bucket_types (type_id, name) VALUES (30, 'UNSPECIFIED')$$);
SELECT expect_error($$INSERT INTO claim_subject_types (type_id, name) VALUES (30, 'lower_case')$$);
SELECT expect_error($$INSERT INTO claim_source_types (type_id, name) VALUES (1, 'RAILS_TABLE_AGAIN')$$);
SELECT expect_error($$INSERT INTO claim_bucket_types (type_id, name) VALUES (31, 'ROUTES')$$);
SELECT expect_error($$INSERT INTO claim_bucket_types (type_id, name, claim_field) VALUES (31, 'ROUTES_TOO', 'route')$$);
SELECT expect_error($$INSERT INTO claim_bucket_types (type_id, name, claim_field) VALUES (31, 'BAD_FIELD', 'BadField')$$);

-- What the registries hold now (operator rows are not builtin).
SELECT type_id, name, claim_field, integer_valued, aliases, builtin FROM claim_bucket_types WHERE NOT builtin ORDER BY type_id;
SELECT type_id, name, aliases, builtin FROM claim_subject_types WHERE NOT builtin ORDER BY type_id;
SELECT type_id, name, aliases, builtin FROM claim_source_types WHERE NOT builtin ORDER BY type_id;
SELECT count(*) FILTER (WHERE builtin) AS builtin_buckets FROM claim_bucket_types;
