-- Registries of bucket, subject and source types: seed rows, constraints,
-- aliases, rows added by an operator reaching the API at once, and built-in
-- rows that cannot change.
BEGIN;
SELECT plan(63);

-- Calls for a cell need a registered cell, whoever makes them; this file runs
-- as a superuser (an administrator), so registering cell 1 is enough.
CREATE ROLE claims_tap_cells NOLOGIN;
SELECT claims_register_cell(1, 'cell-1', 'claims_tap_cells') \g /dev/null

-- The outcome of a GetRecord as a word: 'unclaimed', 'claimed' or the
-- SQLSTATE it raised. Lets a result be kept across ROLLBACK TO SAVEPOINT.
CREATE FUNCTION pg_temp.lookup(request jsonb) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    answer jsonb;
BEGIN
    answer := claims_get_record(request);
    RETURN CASE WHEN answer IS NULL THEN 'unclaimed' ELSE 'claimed' END;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END;
$$;

-- Begin and commit one create for cell 1; returns the lease uuid.
CREATE FUNCTION pg_temp.claim(record jsonb) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    lease uuid;
BEGIN
    lease := (claims_begin_update(jsonb_build_object(
        'cell_id', 1, 'create_records', jsonb_build_array(record))) ->> 'lease_uuid')::uuid;
    PERFORM claims_commit(1, lease);
    RETURN lease;
END;
$$;

-- Seed rows ------------------------------------------------------------------

SELECT is((SELECT count(*)::integer FROM claim_bucket_types), 17, 'seventeen bucket types are seeded');
SELECT is((SELECT count(*)::integer FROM claim_subject_types), 4, 'four subject types are seeded');
SELECT is((SELECT count(*)::integer FROM claim_source_types), 14, 'fourteen source types are seeded');

SELECT results_eq(
    $$SELECT type_id, name, claim_field, integer_valued, aliases, builtin
        FROM claim_bucket_types ORDER BY type_id$$,
    $$VALUES (1, 'ROUTES'::text, 'route'::text, false, '{}'::text[], true),
             (2, 'ORGANIZATION_PATH', 'organization_path', false, '{}', true),
             (3, 'REDIRECT_ROUTES', 'redirect_route', false, '{}', true),
             (4, 'USERNAMES', 'username', false, '{}', true),
             (5, 'EMAILS', 'email', false, '{}', true),
             (6, 'PROJECT_IDS', 'project_id', true, '{}', true),
             (7, 'NAMESPACE_IDS', 'namespace_id', true, '{}', true),
             (8, 'GPG_KEYS', 'gpg_key', false, '{}', true),
             (9, 'SSH_KEYS', 'ssh_key', false, '{}', true),
             (10, 'USER_IDS', 'user_id', true, '{}', true),
             (11, 'ORGANIZATION_IDS', 'organization_id', true, '{}', true),
             (12, 'SERVICE_DESK_CUSTOM_EMAILS', 'service_desk_custom_email', false, '{}', true),
             (13, 'GPG_KEY_FINGERPRINTS', 'gpg_key_fingerprint', false, '{}', true),
             (15, 'SSH_KEY_FINGERPRINTS', 'ssh_key_fingerprint', false, '{}', true),
             (16, 'SNIPPET_IDS', 'snippet_id', true, '{}', true),
             (17, 'PAGES_DOMAINS', 'pages_domain', false, '{}', true),
             (18, 'PAGES_UNIQUE_DOMAINS', 'pages_unique_domain', false, '{}', true)$$,
    'claim_bucket_types holds exactly the claims.v1 bucket types');

SELECT is_empty($$SELECT 1 FROM claim_bucket_types WHERE type_id IN (0, 14)$$,
    'bucket types 0 and 14 are not registered');
SELECT set_eq(
    $$SELECT type_id FROM claim_bucket_types WHERE integer_valued$$,
    ARRAY[6, 7, 10, 11, 16],
    'exactly PROJECT_IDS, NAMESPACE_IDS, USER_IDS, ORGANIZATION_IDS and SNIPPET_IDS are integer-valued');

SELECT results_eq(
    $$SELECT type_id, name, aliases, builtin FROM claim_subject_types ORDER BY type_id$$,
    $$VALUES (1, 'ORGANIZATION'::text, '{}'::text[], true),
             (2, 'NAMESPACE', '{GROUP}', true),
             (3, 'PROJECT', '{}', true),
             (4, 'USER', '{}', true)$$,
    'claim_subject_types holds exactly the claims.v1 subject types');

SELECT results_eq(
    $$SELECT type_id, name, aliases, builtin FROM claim_source_types ORDER BY type_id$$,
    $$VALUES (1, 'RAILS_TABLE_USERS'::text, '{}'::text[], true),
             (2, 'RAILS_TABLE_EMAILS', '{}', true),
             (3, 'RAILS_TABLE_ROUTES', '{}', true),
             (4, 'RAILS_TABLE_PROJECTS', '{}', true),
             (5, 'RAILS_TABLE_NAMESPACES', '{RAILS_TABLE_GROUPS}', true),
             (6, 'RAILS_TABLE_ORGANIZATIONS', '{}', true),
             (7, 'RAILS_TABLE_REDIRECT_ROUTES', '{}', true),
             (8, 'RAILS_TABLE_GPG_KEYS', '{}', true),
             (9, 'RAILS_TABLE_KEYS', '{}', true),
             (10, 'RAILS_TABLE_SERVICE_DESK_SETTINGS', '{}', true),
             (11, 'RAILS_TABLE_MEMBERS', '{}', true),
             (12, 'RAILS_TABLE_SNIPPETS', '{}', true),
             (13, 'RAILS_TABLE_PAGES_DOMAINS', '{}', true),
             (14, 'RAILS_TABLE_PROJECT_SETTINGS', '{}', true)$$,
    'claim_source_types holds exactly the claims.v1 source types');

SELECT results_eq(
    $$SELECT 'subject'::text, type_id, alias FROM claim_subject_types, unnest(aliases) AS alias
      UNION ALL
      SELECT 'source', type_id, alias FROM claim_source_types, unnest(aliases) AS alias
      UNION ALL
      SELECT 'bucket', type_id, alias FROM claim_bucket_types, unnest(aliases) AS alias
      ORDER BY 1, 2, 3$$,
    $$VALUES ('source'::text, 5, 'RAILS_TABLE_GROUPS'::text), ('subject', 2, 'GROUP')$$,
    'the only seeded aliases are GROUP (subject 2) and RAILS_TABLE_GROUPS (source 5)');

-- Registry constraints --------------------------------------------------------

SELECT throws_ok(
    $$INSERT INTO claim_bucket_types (type_id, name) VALUES (0, 'ZERO')$$,
    '23514', 'new row for relation "claim_bucket_types" violates check constraint "claim_bucket_types_type_id_check"',
    'bucket type number 0 is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_bucket_types (type_id, name) VALUES (-3, 'NEGATIVE')$$,
    '23514', 'new row for relation "claim_bucket_types" violates check constraint "claim_bucket_types_type_id_check"',
    'a negative bucket type number is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_bucket_types (type_id, name) VALUES (50, 'UNSPECIFIED')$$,
    '23514', 'new row for relation "claim_bucket_types" violates check constraint "claim_bucket_types_name_check"',
    'bucket type name UNSPECIFIED is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_bucket_types (type_id, name) VALUES (50, 'widgets')$$,
    '23514', 'new row for relation "claim_bucket_types" violates check constraint "claim_bucket_types_name_check"',
    'a lower-case bucket type name is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_bucket_types (type_id, name) VALUES (50, '9WIDGETS')$$,
    '23514', 'new row for relation "claim_bucket_types" violates check constraint "claim_bucket_types_name_check"',
    'a bucket type name starting with a digit is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_bucket_types (type_id, name, claim_field) VALUES (50, 'WIDGETS', 'Widget')$$,
    '23514', 'new row for relation "claim_bucket_types" violates check constraint "claim_bucket_types_claim_field_check"',
    'a claim field that is not snake_case is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_bucket_types (type_id, name) VALUES (50, 'ROUTES')$$,
    '23505', 'duplicate key value violates unique constraint "claim_bucket_types_name_key"',
    'a second bucket type named ROUTES is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_bucket_types (type_id, name, claim_field) VALUES (50, 'WIDGETS', 'email')$$,
    '23505', 'duplicate key value violates unique constraint "claim_bucket_types_claim_field_key"',
    'a second bucket type with claim field email is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_bucket_types (type_id, name) VALUES (14, 'NEW_FOURTEEN'), (1, 'NEW_ONE')$$,
    '23505', 'duplicate key value violates unique constraint "claim_bucket_types_pkey"',
    'a second bucket type number 1 is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_subject_types (type_id, name) VALUES (0, 'ROBOT')$$,
    '23514', 'new row for relation "claim_subject_types" violates check constraint "claim_subject_types_type_id_check"',
    'subject type number 0 is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_subject_types (type_id, name) VALUES (50, 'UNSPECIFIED')$$,
    '23514', 'new row for relation "claim_subject_types" violates check constraint "claim_subject_types_name_check"',
    'subject type name UNSPECIFIED is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_subject_types (type_id, name) VALUES (50, 'USER')$$,
    '23505', 'duplicate key value violates unique constraint "claim_subject_types_name_key"',
    'a second subject type named USER is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_source_types (type_id, name) VALUES (0, 'RAILS_TABLE_ROBOTS')$$,
    '23514', 'new row for relation "claim_source_types" violates check constraint "claim_source_types_type_id_check"',
    'source type number 0 is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_source_types (type_id, name) VALUES (50, 'UNSPECIFIED')$$,
    '23514', 'new row for relation "claim_source_types" violates check constraint "claim_source_types_name_check"',
    'source type name UNSPECIFIED is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_source_types (type_id, name) VALUES (50, 'rails_table_robots')$$,
    '23514', 'new row for relation "claim_source_types" violates check constraint "claim_source_types_name_check"',
    'a lower-case source type name is rejected');
SELECT throws_ok(
    $$INSERT INTO claim_source_types (type_id, name) VALUES (50, 'RAILS_TABLE_USERS')$$,
    '23505', 'duplicate key value violates unique constraint "claim_source_types_name_key"',
    'a second source type named RAILS_TABLE_USERS is rejected');

-- Seeded types and aliases through the API ----------------------------------

SELECT throws_ok(
    $$SELECT claims_get_record('{"bucket": {"type": 14, "value": "x"}}')$$,
    '22023', NULL, 'bucket type 14 is unknown to the API');
SELECT throws_ok(
    $$SELECT claims_get_record('{"bucket": {"type": "GROUP", "value": "x"}}')$$,
    '22023', NULL, 'GROUP is a subject type alias, not a bucket type');
SELECT is(pg_temp.lookup('{"bucket": {"type": "PAGES_UNIQUE_DOMAINS", "value": "x"}}'), 'unclaimed',
    'the last seeded bucket type is known to the API by name');
SELECT is(pg_temp.lookup('{"bucket": {"type": 18, "value": "x"}}'), 'unclaimed',
    'the last seeded bucket type is known to the API by number');

SELECT lives_ok(
    $$SELECT pg_temp.claim('{"bucket": {"type": "ROUTES", "value": "gitlab-org"},
                             "subject": {"type": "GROUP", "id": 9},
                             "source": {"type": "RAILS_TABLE_GROUPS", "rails_primary_key_id": 9}}')$$,
    'a claim naming subject GROUP and source RAILS_TABLE_GROUPS is accepted');
SELECT results_eq(
    $$SELECT r #>> '{record,metadata,subject,type}', r #>> '{record,metadata,source,type}'
        FROM claims_get_record('{"bucket": {"type": "ROUTES", "value": "gitlab-org"}}') AS r$$,
    $$VALUES ('NAMESPACE'::text, 'RAILS_TABLE_NAMESPACES'::text)$$,
    'the aliases are stored as the canonical NAMESPACE and RAILS_TABLE_NAMESPACES');
SELECT results_eq(
    $$SELECT subject_type, source_type FROM claims WHERE bucket_value = 'gitlab-org'$$,
    $$VALUES (2, 5)$$,
    'the aliases are stored as type numbers 2 and 5');
SELECT is(
    jsonb_array_length(claims_list_records(
        '{"cell_id": 1, "source_type": "RAILS_TABLE_GROUPS"}') -> 'records'),
    1,
    'ListRecords accepts the alias RAILS_TABLE_GROUPS and finds the claim');

-- Types added by an operator -------------------------------------------------

SELECT is(pg_temp.lookup('{"bucket": {"type": "WIDGETS", "value": "w1"}}'), '22023',
    'bucket type WIDGETS is unknown before it is registered');

SELECT lives_ok(
    $$INSERT INTO claim_bucket_types (type_id, name, claim_field, aliases)
      VALUES (40, 'WIDGETS', 'widget', '{GADGETS}')$$,
    'an operator can register bucket type 40 WIDGETS');
SELECT lives_ok(
    $$INSERT INTO claim_subject_types (type_id, name) VALUES (40, 'ROBOT')$$,
    'an operator can register subject type 40 ROBOT');
SELECT lives_ok(
    $$INSERT INTO claim_source_types (type_id, name, aliases)
      VALUES (40, 'RAILS_TABLE_WIDGETS', '{RAILS_TABLE_GADGETS}')$$,
    'an operator can register source type 40 RAILS_TABLE_WIDGETS');
SELECT results_eq(
    $$SELECT builtin FROM claim_bucket_types WHERE type_id = 40
      UNION ALL SELECT builtin FROM claim_subject_types WHERE type_id = 40
      UNION ALL SELECT builtin FROM claim_source_types WHERE type_id = 40$$,
    $$VALUES (false), (false), (false)$$,
    'rows added by an operator are not builtin');

SELECT is(pg_temp.lookup('{"bucket": {"type": "WIDGETS", "value": "w1"}}'), 'unclaimed',
    'a new bucket type is known to the API in the same transaction');
SELECT is(pg_temp.lookup('{"bucket": {"type": "GADGETS", "value": "w1"}}'), 'unclaimed',
    'a new bucket type is known by its alias');
SELECT is(pg_temp.lookup('{"claim": {"widget": "w1"}}'), 'unclaimed',
    'a new bucket type is known by its claim field');

SELECT lives_ok(
    $$SELECT pg_temp.claim('{"bucket": {"type": "GADGETS", "value": "w1"},
                             "subject": {"type": "ROBOT", "id": 7},
                             "source": {"type": "RAILS_TABLE_GADGETS", "rails_primary_key_id": 7}}')$$,
    'a claim of the new bucket, subject and source types is accepted');
SELECT results_eq(
    $$SELECT r #>> '{record,metadata,bucket,type}', r #>> '{record,metadata,subject,type}',
             r #>> '{record,metadata,source,type}', r #>> '{record,metadata,claim,widget}'
        FROM claims_get_record('{"claim": {"widget": "w1"}}') AS r$$,
    $$VALUES ('WIDGETS'::text, 'ROBOT'::text, 'RAILS_TABLE_WIDGETS'::text, 'w1'::text)$$,
    'the record of the new types carries their canonical names and the claim field');
SELECT is(
    jsonb_array_length(claims_list_records('{"cell_id": 1, "source_type": 40}') -> 'records'),
    1,
    'ListRecords finds the claim under the new source type number');

SELECT lives_ok(
    $$UPDATE claim_bucket_types SET name = 'WIDGETZ' WHERE type_id = 40$$,
    'an operator can rename a bucket type');
SELECT is(pg_temp.lookup('{"bucket": {"type": "WIDGETS", "value": "w1"}}'), '22023',
    'the old name of a renamed bucket type is unknown at once');
SELECT is(
    claims_get_record('{"bucket": {"type": "WIDGETZ", "value": "w1"}}') #>> '{record,metadata,bucket,type}',
    'WIDGETZ',
    'the new name of a renamed bucket type finds the claim');

-- A row whose subject and source types are not registered (written
-- directly, as after a registry row was removed) is still readable.
INSERT INTO claims (uuid, bucket_type, bucket_value, bucket_digest, subject_type, subject_id,
                    source_type, source_id, creator_id, status)
VALUES ('00000000-0000-4000-8000-000000000077', 4, 'orphan', sha256('orphan'), 77, 1, 78, '\x01',
        1, 'ACTIVE');
SELECT results_eq(
    $$SELECT r #> '{record,metadata,subject,type}', r #> '{record,metadata,source,type}'
        FROM claims_get_record('{"claim": {"username": "orphan"}}') AS r$$,
    $$VALUES ('77'::jsonb, '78'::jsonb)$$,
    'subject and source types that are not registered are shown by their numbers');

-- Changes rolled back to a savepoint are forgotten by the API ---------------

SAVEPOINT registry_change;
INSERT INTO claim_bucket_types (type_id, name) VALUES (41, 'SPROCKETS');
SELECT pg_temp.lookup('{"bucket": {"type": "SPROCKETS", "value": "s"}}') AS sprockets_inside \gset
ROLLBACK TO SAVEPOINT registry_change;
SELECT is(:'sprockets_inside'::text, 'unclaimed', 'a bucket type inserted after a savepoint is known');
SELECT is(pg_temp.lookup('{"bucket": {"type": "SPROCKETS", "value": "s"}}'), '22023',
    'the bucket type is unknown again after ROLLBACK TO SAVEPOINT');

-- TRUNCATE would delete the built-in rows and is refused (below); with the
-- guard disabled, as an update script of the extension may do, the
-- registries still follow it.
SAVEPOINT registry_truncate;
ALTER TABLE claim_source_types DISABLE TRIGGER claims_builtin_types_guard_truncate;
TRUNCATE claim_source_types;
SELECT pg_temp.lookup('{"claim": {"username": "nobody"}}') AS get_after_truncate \gset
ROLLBACK TO SAVEPOINT registry_truncate;
SELECT is(:'get_after_truncate'::text, 'unclaimed',
    'GetRecord by claim field works while the source registry is empty');
SELECT is(pg_temp.lookup('{"bucket": {"type": "USERNAMES", "value": "nobody"}}'), 'unclaimed',
    'the registries are usable again after the TRUNCATE is rolled back');
SELECT is(
    jsonb_array_length(claims_list_records('{"cell_id": 1, "source_type": "RAILS_TABLE_USERS"}') -> 'records'),
    0,
    'source type RAILS_TABLE_USERS is known again after the TRUNCATE is rolled back');

-- TRUNCATE fires the statement trigger too (checked without a savepoint so the
-- failed call does not end the script).
CREATE FUNCTION pg_temp.list_users_after_truncate() RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    ALTER TABLE claim_source_types DISABLE TRIGGER claims_builtin_types_guard_truncate;
    TRUNCATE claim_source_types;
    PERFORM claims_list_records('{"cell_id": 1, "source_type": "RAILS_TABLE_USERS"}');
    RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'listed';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END;
$$;
SELECT is(pg_temp.list_users_after_truncate(), '22023',
    'after TRUNCATE of the source registry, RAILS_TABLE_USERS is unknown to the API');
SELECT is((SELECT count(*)::integer FROM claim_source_types), 15,
    'the TRUNCATE inside the function was undone with it');

-- Built-in rows ----------------------------------------------------------------

-- pg_dump keeps only the rows an operator added (WHERE NOT builtin); the
-- built-in ones come back from CREATE EXTENSION as shipped. So they cannot
-- change: a change would be lost by a dump and restore.
SELECT throws_ok(
    $$UPDATE claim_subject_types SET aliases = '{GROUP,TEAM}' WHERE name = 'NAMESPACE'$$,
    '42501', 'permission denied to change built-in subject type "NAMESPACE" in claim_subject_types',
    'an alias cannot be added to a built-in type');
SELECT throws_ok(
    $$INSERT INTO claim_bucket_types (type_id, name, builtin) VALUES (42, 'COGS', true)$$,
    '42501', 'permission denied to add built-in bucket type "COGS" to claim_bucket_types',
    'an operator cannot add a built-in type');
SELECT throws_ok(
    $$DELETE FROM claim_source_types WHERE type_id = 1$$,
    '42501', 'permission denied to delete built-in source type "RAILS_TABLE_USERS" from claim_source_types',
    'a built-in type cannot be deleted');
SELECT throws_ok(
    $$TRUNCATE claim_source_types$$,
    '42501', 'permission denied to truncate claim_source_types',
    'a registry holding built-in types cannot be truncated');
SELECT results_eq(
    $$SELECT (SELECT count(*)::integer FROM claim_source_types),
             (SELECT aliases FROM claim_subject_types WHERE type_id = 2)$$,
    $$VALUES (15, '{GROUP}'::text[])$$,
    'the refused statements changed nothing');

-- Aliases --------------------------------------------------------------------

-- An alias must not change what an existing name means. Either the registry
-- rejects an alias equal to another type's name, or the name keeps resolving
-- to its own type.
CREATE FUNCTION pg_temp.name_after_shadowing_alias() RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        INSERT INTO claim_bucket_types (type_id, name, claim_field, aliases)
        VALUES (39, 'GIZMOS', 'gizmo', '{WIDGETZ}');
    EXCEPTION WHEN OTHERS THEN
        RETURN 'alias rejected';
    END;
    RETURN coalesce(
        claims_get_record('{"bucket": {"type": "WIDGETZ", "value": "w1"}}') #>> '{record,metadata,bucket,type}',
        'not found');
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END;
$$;
SELECT pg_temp.name_after_shadowing_alias() AS shadowing_outcome \gset
SELECT ok(
    :'shadowing_outcome'::text IN ('alias rejected', 'WIDGETZ'),
    'an alias equal to another bucket type''s name does not take over that name')
    || CASE WHEN :'shadowing_outcome'::text IN ('alias rejected', 'WIDGETZ') THEN ''
            ELSE E'\n' || diag('GetRecord of WIDGETZ gave: ' || :'shadowing_outcome'::text) END;

SELECT throws_ok(
    $$INSERT INTO claim_subject_types (type_id, name, aliases) VALUES (41, 'DROID', '{"", droid}')$$,
    NULL, NULL,
    'an alias that is not a valid type name (empty, lower case) is rejected');

SELECT is(
    claims_get_record('{"bucket": {"type": 40, "value": "w1"}}') #>> '{record,metadata,bucket,type}',
    'WIDGETZ',
    'bucket type 40 still finds its claim by number');

SELECT * FROM finish();
ROLLBACK;
