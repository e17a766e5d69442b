-- CREATE EXTENSION claims SCHEMA <other>: every object lands in that schema
-- and the API works there, whatever the caller's search_path; a session that
-- used one copy works with the next after DROP and CREATE. The extension
-- created by the test runner in public is dropped and re-created inside this
-- transaction; the final ROLLBACK restores it.
BEGIN;
SELECT plan(49);

-- Calls for a cell need a registered cell, whoever makes them; this file runs
-- as a superuser (an administrator), so registering the cells it uses is
-- enough. Cells are rows of the extension: each copy registers its own.
-- (Quiet: registrations after the first note that the role is already a
-- member of claims_cell.)
SET LOCAL client_min_messages = warning;
CREATE ROLE claims_tap_cells NOLOGIN;
SELECT claims_register_cell(4, 'cell-4', 'claims_tap_cells') \g /dev/null

-- Use the extension in public first, so this session has cached plans and
-- registries of the public copy when the schema changes under it.
SELECT claims_begin_update('{"cell_id": 4, "create_records": [
    {"bucket": {"type": "ROUTES", "value": "in-public"}, "subject": {"type": "USER", "id": 40},
     "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 40}}]}') ->> 'lease_uuid'
    AS public_lease \gset
SELECT lives_ok(format('SELECT claims_commit(4, %L)', :'public_lease'),
    'a claim is committed in the public copy');
INSERT INTO claim_bucket_types (type_id, name, claim_field) VALUES (41, 'GADGETS', 'gadget');
SELECT is(claims_get_record('{"claim": {"gadget": "g"}}'), NULL::jsonb,
    'a bucket type added to the public copy is known');

SELECT lives_ok($$DROP EXTENSION claims$$, 'the extension can be dropped from public');
-- A schema name that needs quoting: upper case and a space.
SELECT lives_ok($$CREATE SCHEMA "Claims Store"$$, 'a schema "Claims Store" can be created');
SELECT lives_ok($$CREATE EXTENSION claims SCHEMA "Claims Store"$$,
    'CREATE EXTENSION claims SCHEMA "Claims Store" succeeds');

SELECT is((SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'claims'),
    '"Claims Store"', 'pg_extension.extnamespace is "Claims Store"');

SELECT tables_are('Claims Store',
    ARRAY['claims', 'claim_leases', 'claim_bucket_types', 'claim_subject_types', 'claim_source_types',
          'claim_cells', 'claim_admin_actions']);
SELECT hasnt_table('public', 'claims', 'no claims table is left in public');
SELECT has_enum('Claims Store', 'claim_status', 'enum claim_status is in "Claims Store"');
SELECT has_enum('Claims Store', 'claim_lease_state', 'enum claim_lease_state is in "Claims Store"');
SELECT has_function('Claims Store', 'claims_begin_update', ARRAY['jsonb']);
SELECT has_function('Claims Store', 'claims_commit', ARRAY['bigint', 'uuid']);
SELECT has_function('Claims Store', 'claims_rollback', ARRAY['bigint', 'uuid']);
SELECT has_function('Claims Store', 'claims_get_record', ARRAY['jsonb']);
SELECT has_function('Claims Store', 'claims_list_leases', ARRAY['jsonb']);
SELECT has_function('Claims Store', 'claims_list_records', ARRAY['jsonb']);
SELECT hasnt_function('public', 'claims_begin_update', ARRAY['jsonb'],
    'no claims_begin_update is left in public');
SELECT is_empty(
    $$SELECT pg_describe_object(d.classid, d.objid, d.objsubid)
        FROM pg_depend d
        JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'claims'
        LEFT JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
        LEFT JOIN pg_type t ON d.classid = 'pg_type'::regclass AND t.oid = d.objid
        LEFT JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
       WHERE d.deptype = 'e'
         AND d.classid IN ('pg_class'::regclass, 'pg_type'::regclass, 'pg_proc'::regclass)
         AND coalesce(c.relnamespace, t.typnamespace, p.pronamespace) IS DISTINCT FROM e.extnamespace$$,
    'tables, types and functions all live in "Claims Store"');
SELECT col_type_is('Claims Store', 'claims', 'status', 'Claims Store', 'claim_status',
    'claims.status has the enum of the same schema');
SELECT is(
    (SELECT prosecdef FROM pg_proc WHERE oid = '"Claims Store".claims_begin_update(jsonb)'::regprocedure),
    false,
    'claims_begin_update is no SECURITY DEFINER in "Claims Store" either');
SELECT set_eq(
    $$SELECT unnest(extconfig)::regclass::text COLLATE "default" FROM pg_extension WHERE extname = 'claims'$$,
    ARRAY['"Claims Store".claims', '"Claims Store".claim_leases', '"Claims Store".claim_bucket_types',
          '"Claims Store".claim_subject_types', '"Claims Store".claim_source_types',
          '"Claims Store".claim_cells', '"Claims Store".claim_admin_actions',
          '"Claims Store".claim_admin_actions_action_id_seq'],
    'extconfig names the tables of "Claims Store"');
SELECT is((SELECT count(*)::integer FROM "Claims Store".claim_bucket_types), 17,
    'the bucket registry is seeded in "Claims Store"');
SELECT throws_ok($$ALTER EXTENSION claims SET SCHEMA public$$, '0A000', NULL,
    'the extension cannot be moved back to public');

-- The API, with a search_path that does not name the extension's schema.
SET LOCAL search_path = public;

SELECT is((SELECT count(*)::integer FROM "Claims Store".claim_cells), 0,
    'the new copy starts with no registered cell');
SELECT throws_ok($$SELECT "Claims Store".claims_list_leases('{"cell_id": 4}')$$, '42501',
    'cell 4 is not registered',
    'a cell registered in the dropped copy is not registered in "Claims Store"');
SELECT lives_ok(
    $$SELECT "Claims Store".claims_register_cell(id, 'cell-' || id, 'claims_tap_cells')
        FROM generate_series(5, 6) AS id$$,
    'cells 5 and 6 are registered in "Claims Store"');

SELECT "Claims Store".claims_begin_update('{"cell_id": 5, "create_records": [
    {"bucket": {"type": "ROUTES", "value": "elsewhere"}, "subject": {"type": "GROUP", "id": 50},
     "source": {"type": "RAILS_TABLE_GROUPS", "rails_primary_key_id": 50}}]}') ->> 'lease_uuid'
    AS elsewhere_lease \gset
SELECT is(
    (SELECT state::text FROM "Claims Store".claim_leases WHERE uuid = :'elsewhere_lease'::uuid),
    'outstanding',
    'claims_begin_update writes its lease into "Claims Store".claim_leases');
SELECT is(
    "Claims Store".claims_list_leases('{"cell_id": 5}') #>> '{leases,0,uuid}',
    :'elsewhere_lease'::text,
    'claims_list_leases reads "Claims Store"');
SELECT lives_ok(format('SELECT "Claims Store".claims_commit(5, %L)', :'elsewhere_lease'),
    'claims_commit works in "Claims Store"');
SELECT results_eq(
    $$SELECT r #>> '{record,status}', r #>> '{record,metadata,subject,type}'
        FROM "Claims Store".claims_get_record('{"bucket": {"type": "ROUTES", "value": "elsewhere"}}') AS r$$,
    $$VALUES ('ACTIVE'::text, 'NAMESPACE'::text)$$,
    'claims_get_record reads the committed claim from "Claims Store"');
SELECT is(
    jsonb_array_length("Claims Store".claims_list_records(
        '{"cell_id": 5, "source_type": "RAILS_TABLE_NAMESPACES"}') -> 'records'),
    1,
    'claims_list_records reads "Claims Store"');
SELECT throws_ok(
    $$SELECT "Claims Store".claims_begin_update('{"cell_id": 6, "create_records": [
        {"bucket": {"type": "ROUTES", "value": "elsewhere"}, "subject": {"type": "GROUP", "id": 60},
         "source": {"type": "RAILS_TABLE_GROUPS", "rails_primary_key_id": 60}}]}')$$,
    '23505', NULL,
    'the unique key of "Claims Store".claims still holds a committed value');
SELECT throws_ok($$SELECT "Claims Store".claims_get_record(NULL)$$, '22004', NULL,
    'NULL handling is the same in "Claims Store"');
SELECT is(
    "Claims Store".claims_get_record('{"bucket": {"type": "ROUTES", "value": "in-public"}}'),
    NULL::jsonb,
    'the claim of the dropped public copy is not found in "Claims Store"');
SELECT throws_ok($$SELECT "Claims Store".claims_get_record('{"claim": {"gadget": "g"}}')$$,
    '22023', NULL,
    'the bucket type of the dropped public copy is unknown in "Claims Store"');

-- The registry trigger of the new schema reaches the API.
INSERT INTO "Claims Store".claim_bucket_types (type_id, name, claim_field) VALUES (40, 'WIDGETS', 'widget');
SELECT lives_ok(
    $$SELECT "Claims Store".claims_get_record('{"claim": {"widget": "w"}}')$$,
    'a bucket type added to "Claims Store".claim_bucket_types is known at once');

-- A router (a role whose only grant is claims_router): needs USAGE on the
-- schema, then claims_get_record works and the tables stay closed.
CREATE ROLE claims_tap_elsewhere NOLOGIN NOSUPERUSER IN ROLE claims_router;
SET LOCAL ROLE claims_tap_elsewhere;
SELECT throws_ok($$SELECT "Claims Store".claims_get_record('{"claim": {"route": "elsewhere"}}')$$,
    '42501', NULL,
    'without USAGE on "Claims Store" the role cannot reach the API');
RESET ROLE;
GRANT USAGE ON SCHEMA "Claims Store" TO claims_tap_elsewhere;
SET LOCAL ROLE claims_tap_elsewhere;
SELECT is(
    "Claims Store".claims_get_record('{"claim": {"route": "elsewhere"}}') #>> '{record,cell_id}',
    '5',
    'with USAGE on "Claims Store" the router can call claims_get_record');
SELECT throws_ok($$SELECT * FROM "Claims Store".claims$$, '42501', 'permission denied for table claims',
    'the role cannot SELECT "Claims Store".claims');
SELECT throws_ok($$DELETE FROM "Claims Store".claim_leases$$, '42501', 'permission denied for table claim_leases',
    'the role cannot DELETE from "Claims Store".claim_leases');
SELECT throws_ok($$INSERT INTO "Claims Store".claim_source_types (type_id, name) VALUES (60, 'MALLORY')$$,
    '42501', 'permission denied for table claim_source_types',
    'the role cannot INSERT into "Claims Store".claim_source_types');
SELECT is((SELECT count(*)::integer FROM "Claims Store".claim_subject_types), 4,
    'the role can read "Claims Store".claim_subject_types');
RESET ROLE;

-- Back to public in the same session: nothing of "Claims Store" is used.
SELECT lives_ok($$DROP EXTENSION claims$$, 'the extension can be dropped from "Claims Store"');
SELECT lives_ok($$CREATE EXTENSION claims SCHEMA public$$, 'the extension can be created in public again');
SELECT lives_ok($$SELECT claims_register_cell(6, 'cell-6', 'claims_tap_cells')$$,
    'cell 6 is registered in the re-created public copy');
SELECT is(claims_get_record('{"bucket": {"type": "ROUTES", "value": "elsewhere"}}'), NULL::jsonb,
    'the re-created public copy is empty');
SELECT throws_ok($$SELECT claims_get_record('{"claim": {"widget": "w"}}')$$, '22023', NULL,
    'the bucket type added in "Claims Store" is unknown to the re-created copy');
SELECT lives_ok(
    $$SELECT claims_begin_update('{"cell_id": 6, "create_records": [
        {"bucket": {"type": "ROUTES", "value": "elsewhere"}, "subject": {"type": "GROUP", "id": 60},
         "source": {"type": "RAILS_TABLE_GROUPS", "rails_primary_key_id": 60}}]}')$$,
    'a value claimed in the dropped copy can be claimed in the re-created one');
SELECT is((SELECT count(*)::integer FROM public.claim_leases WHERE creator_id = 6), 1,
    'the lease was written to public.claim_leases');

SELECT * FROM finish();
ROLLBACK;
