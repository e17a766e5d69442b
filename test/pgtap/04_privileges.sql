-- Privileges: nobody but the owner writes the tables or reads claims and
-- leases directly; the registries are readable by everyone; PUBLIC may not
-- call the API: cells and administrators may, the router only
-- claims_get_record. A role without any grant can call nothing; a
-- registered cell's role, whose only grant is claims_cell, works through the
-- API for its own cell.
BEGIN;
SELECT plan(99);

-- PUBLIC ----------------------------------------------------------------------

SELECT table_privs_are('claims', 'public', ARRAY[]::text[],
    'PUBLIC has no privilege on claims');
SELECT table_privs_are('claim_leases', 'public', ARRAY[]::text[],
    'PUBLIC has no privilege on claim_leases');
SELECT table_privs_are('claim_bucket_types', 'public', ARRAY['SELECT'],
    'PUBLIC may only SELECT claim_bucket_types');
SELECT table_privs_are('claim_subject_types', 'public', ARRAY['SELECT'],
    'PUBLIC may only SELECT claim_subject_types');
SELECT table_privs_are('claim_source_types', 'public', ARRAY['SELECT'],
    'PUBLIC may only SELECT claim_source_types');
SELECT table_privs_are('claim_cells', 'public', ARRAY[]::text[],
    'PUBLIC has no privilege on claim_cells');
SELECT table_privs_are('claim_admin_actions', 'public', ARRAY[]::text[],
    'PUBLIC has no privilege on claim_admin_actions');
SELECT sequence_privs_are('claim_admin_actions_action_id_seq', 'public', ARRAY[]::text[],
    'PUBLIC has no privilege on claim_admin_actions_action_id_seq');

-- Whatever tables the extension has, PUBLIC writes none of them.
SELECT is_empty(
    $$SELECT c.oid::regclass, p.priv
        FROM pg_depend d
        JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'claims'
        JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
        CROSS JOIN unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) AS p(priv)
       WHERE d.deptype = 'e' AND c.relkind IN ('r', 'p', 'v', 'm')
         AND has_table_privilege('public', c.oid, p.priv)$$,
    'PUBLIC has no INSERT, UPDATE, DELETE or TRUNCATE on any table of the extension');
SELECT is_empty(
    $$SELECT c.oid::regclass, a.attname
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
       WHERE c.oid IN ('claims'::regclass, 'claim_leases'::regclass)
         AND a.attnum > 0 AND NOT a.attisdropped
         AND has_column_privilege('public', c.oid, a.attnum, 'SELECT')$$,
    'PUBLIC has no column-level SELECT on claims or claim_leases');

SELECT function_privs_are('claims_begin_update', ARRAY['jsonb'], 'public', ARRAY[]::text[]);
SELECT function_privs_are('claims_commit', ARRAY['bigint', 'uuid'], 'public', ARRAY[]::text[]);
SELECT function_privs_are('claims_rollback', ARRAY['bigint', 'uuid'], 'public', ARRAY[]::text[]);
SELECT function_privs_are('claims_get_record', ARRAY['jsonb'], 'public', ARRAY[]::text[]);
SELECT function_privs_are('claims_list_leases', ARRAY['jsonb'], 'public', ARRAY[]::text[]);
SELECT function_privs_are('claims_list_records', ARRAY['jsonb'], 'public', ARRAY[]::text[]);
SELECT function_privs_are('claims_registry_changed', ARRAY[]::name[], 'public', ARRAY[]::text[]);
SELECT function_privs_are('claims_builtin_types_guard', ARRAY[]::name[], 'public', ARRAY[]::text[]);

-- No SECURITY DEFINER function of the extension (the administrator
-- functions and claims_audit, claims_check) is for PUBLIC.
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_proc p
        JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
        JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'claims'
       WHERE p.prosecdef
         AND has_function_privilege('public', p.oid, 'EXECUTE')$$,
    'PUBLIC cannot execute any SECURITY DEFINER function of the extension');

-- The roles of the security model -----------------------------------------------

-- Cells and administrators call the whole API.
SELECT function_privs_are('claims_begin_update', ARRAY['jsonb'], 'claims_cell', ARRAY['EXECUTE']);
SELECT function_privs_are('claims_commit', ARRAY['bigint', 'uuid'], 'claims_cell', ARRAY['EXECUTE']);
SELECT function_privs_are('claims_rollback', ARRAY['bigint', 'uuid'], 'claims_cell', ARRAY['EXECUTE']);
SELECT function_privs_are('claims_get_record', ARRAY['jsonb'], 'claims_cell', ARRAY['EXECUTE']);
SELECT function_privs_are('claims_list_leases', ARRAY['jsonb'], 'claims_cell', ARRAY['EXECUTE']);
SELECT function_privs_are('claims_list_records', ARRAY['jsonb'], 'claims_cell', ARRAY['EXECUTE']);

SELECT function_privs_are('claims_begin_update', ARRAY['jsonb'], 'claims_admin', ARRAY['EXECUTE']);
SELECT function_privs_are('claims_commit', ARRAY['bigint', 'uuid'], 'claims_admin', ARRAY['EXECUTE']);
SELECT function_privs_are('claims_rollback', ARRAY['bigint', 'uuid'], 'claims_admin', ARRAY['EXECUTE']);
SELECT function_privs_are('claims_get_record', ARRAY['jsonb'], 'claims_admin', ARRAY['EXECUTE']);
SELECT function_privs_are('claims_list_leases', ARRAY['jsonb'], 'claims_admin', ARRAY['EXECUTE']);
SELECT function_privs_are('claims_list_records', ARRAY['jsonb'], 'claims_admin', ARRAY['EXECUTE']);

-- The router only looks values up.
SELECT function_privs_are('claims_begin_update', ARRAY['jsonb'], 'claims_router', ARRAY[]::text[]);
SELECT function_privs_are('claims_commit', ARRAY['bigint', 'uuid'], 'claims_router', ARRAY[]::text[]);
SELECT function_privs_are('claims_rollback', ARRAY['bigint', 'uuid'], 'claims_router', ARRAY[]::text[]);
SELECT function_privs_are('claims_get_record', ARRAY['jsonb'], 'claims_router', ARRAY['EXECUTE']);
SELECT function_privs_are('claims_list_leases', ARRAY['jsonb'], 'claims_router', ARRAY[]::text[]);
SELECT function_privs_are('claims_list_records', ARRAY['jsonb'], 'claims_router', ARRAY[]::text[]);

-- Cells and the router read no table of claims; administrators read them all
-- and write none.
SELECT table_privs_are('claims', 'claims_cell', ARRAY[]::text[],
    'claims_cell has no privilege on claims');
SELECT table_privs_are('claim_leases', 'claims_router', ARRAY[]::text[],
    'claims_router has no privilege on claim_leases');
SELECT table_privs_are('claims', 'claims_admin', ARRAY['SELECT'],
    'claims_admin may only SELECT claims');
SELECT table_privs_are('claim_leases', 'claims_admin', ARRAY['SELECT'],
    'claims_admin may only SELECT claim_leases');
SELECT table_privs_are('claim_cells', 'claims_admin', ARRAY['SELECT'],
    'claims_admin may only SELECT claim_cells');
SELECT table_privs_are('claim_admin_actions', 'claims_admin', ARRAY['SELECT'],
    'claims_admin may only SELECT claim_admin_actions');

-- A role with no grants --------------------------------------------------------

CREATE ROLE claims_tap_plain NOLOGIN NOSUPERUSER NOINHERIT;

SELECT table_privs_are('claims', 'claims_tap_plain', ARRAY[]::text[],
    'a role without grants has no privilege on claims');
SELECT table_privs_are('claim_leases', 'claims_tap_plain', ARRAY[]::text[],
    'a role without grants has no privilege on claim_leases');
SELECT table_privs_are('claim_bucket_types', 'claims_tap_plain', ARRAY['SELECT'],
    'a role without grants may only SELECT claim_bucket_types');
SELECT table_privs_are('claim_subject_types', 'claims_tap_plain', ARRAY['SELECT'],
    'a role without grants may only SELECT claim_subject_types');
SELECT table_privs_are('claim_source_types', 'claims_tap_plain', ARRAY['SELECT'],
    'a role without grants may only SELECT claim_source_types');

SET LOCAL ROLE claims_tap_plain;

SELECT is(current_user::text, 'claims_tap_plain', 'the tests below run as the role without grants');

SELECT throws_ok($$SELECT * FROM claims$$, '42501', 'permission denied for table claims',
    'the role cannot SELECT claims');
SELECT throws_ok($$SELECT * FROM claim_leases$$, '42501', 'permission denied for table claim_leases',
    'the role cannot SELECT claim_leases');

SELECT throws_ok(
    $$INSERT INTO claims (uuid, bucket_type, bucket_value, bucket_digest, subject_type, subject_id,
                          source_type, source_id, creator_id, status)
      VALUES (gen_random_uuid(), 4, 'mallory', sha256('mallory'), 4, 1, 1, '\x01', 1, 'ACTIVE')$$,
    '42501', 'permission denied for table claims', 'the role cannot INSERT into claims');
SELECT throws_ok($$UPDATE claims SET creator_id = 2$$,
    '42501', 'permission denied for table claims', 'the role cannot UPDATE claims');
SELECT throws_ok($$DELETE FROM claims$$,
    '42501', 'permission denied for table claims', 'the role cannot DELETE from claims');
SELECT throws_ok($$TRUNCATE claims$$,
    '42501', 'permission denied for table claims', 'the role cannot TRUNCATE claims');

SELECT throws_ok(
    $$INSERT INTO claim_leases (uuid, creator_id, payload, claim_types, claim_digests)
      VALUES (gen_random_uuid(), 1, '{}', '{}', '{}')$$,
    '42501', 'permission denied for table claim_leases', 'the role cannot INSERT into claim_leases');
SELECT throws_ok($$UPDATE claim_leases SET state = 'committed'$$,
    '42501', 'permission denied for table claim_leases', 'the role cannot UPDATE claim_leases');
SELECT throws_ok($$DELETE FROM claim_leases$$,
    '42501', 'permission denied for table claim_leases', 'the role cannot DELETE from claim_leases');
SELECT throws_ok($$TRUNCATE claim_leases$$,
    '42501', 'permission denied for table claim_leases', 'the role cannot TRUNCATE claim_leases');

SELECT throws_ok($$INSERT INTO claim_bucket_types (type_id, name) VALUES (60, 'MALLORY')$$,
    '42501', 'permission denied for table claim_bucket_types', 'the role cannot INSERT into claim_bucket_types');
SELECT throws_ok($$UPDATE claim_bucket_types SET name = 'MALLORY' WHERE type_id = 4$$,
    '42501', 'permission denied for table claim_bucket_types', 'the role cannot UPDATE claim_bucket_types');
SELECT throws_ok($$DELETE FROM claim_bucket_types$$,
    '42501', 'permission denied for table claim_bucket_types', 'the role cannot DELETE from claim_bucket_types');
SELECT throws_ok($$TRUNCATE claim_bucket_types$$,
    '42501', 'permission denied for table claim_bucket_types', 'the role cannot TRUNCATE claim_bucket_types');

SELECT throws_ok($$INSERT INTO claim_subject_types (type_id, name) VALUES (60, 'MALLORY')$$,
    '42501', 'permission denied for table claim_subject_types', 'the role cannot INSERT into claim_subject_types');
SELECT throws_ok($$UPDATE claim_subject_types SET aliases = '{MALLORY}'$$,
    '42501', 'permission denied for table claim_subject_types', 'the role cannot UPDATE claim_subject_types');
SELECT throws_ok($$DELETE FROM claim_subject_types$$,
    '42501', 'permission denied for table claim_subject_types', 'the role cannot DELETE from claim_subject_types');
SELECT throws_ok($$TRUNCATE claim_subject_types$$,
    '42501', 'permission denied for table claim_subject_types', 'the role cannot TRUNCATE claim_subject_types');

SELECT throws_ok($$INSERT INTO claim_source_types (type_id, name) VALUES (60, 'MALLORY')$$,
    '42501', 'permission denied for table claim_source_types', 'the role cannot INSERT into claim_source_types');
SELECT throws_ok($$UPDATE claim_source_types SET aliases = '{MALLORY}'$$,
    '42501', 'permission denied for table claim_source_types', 'the role cannot UPDATE claim_source_types');
SELECT throws_ok($$DELETE FROM claim_source_types$$,
    '42501', 'permission denied for table claim_source_types', 'the role cannot DELETE from claim_source_types');
SELECT throws_ok($$TRUNCATE claim_source_types$$,
    '42501', 'permission denied for table claim_source_types', 'the role cannot TRUNCATE claim_source_types');

SELECT is((SELECT count(*)::integer FROM claim_bucket_types), 17, 'the role can read claim_bucket_types');
SELECT is((SELECT name FROM claim_subject_types WHERE 'GROUP' = ANY (aliases)), 'NAMESPACE',
    'the role can read claim_subject_types');
SELECT is((SELECT type_id FROM claim_source_types WHERE name = 'RAILS_TABLE_USERS'), 1,
    'the role can read claim_source_types');

SELECT throws_ok($$SET claims.max_batch_size = 5000$$, '42501', NULL,
    'the role cannot change claims.max_batch_size');

-- Neither a cell, a router nor an administrator: no API function at all.
SELECT throws_ok($$SELECT claims_begin_update('{"cell_id": 3, "create_records": [
    {"bucket": {"type": "USERNAMES", "value": "plain-user"}, "subject": {"type": "USER", "id": 30},
     "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 30}}]}')$$,
    '42501', 'permission denied for function claims_begin_update',
    'the role cannot call claims_begin_update');
SELECT throws_ok($$SELECT claims_commit(3, '00000000-0000-4000-8000-000000000001')$$,
    '42501', 'permission denied for function claims_commit', 'the role cannot call claims_commit');
SELECT throws_ok($$SELECT claims_rollback(3, '00000000-0000-4000-8000-000000000001')$$,
    '42501', 'permission denied for function claims_rollback', 'the role cannot call claims_rollback');
SELECT throws_ok($$SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "plain-user"}}')$$,
    '42501', 'permission denied for function claims_get_record', 'the role cannot call claims_get_record');
SELECT throws_ok($$SELECT claims_list_leases('{"cell_id": 3}')$$,
    '42501', 'permission denied for function claims_list_leases', 'the role cannot call claims_list_leases');
SELECT throws_ok($$SELECT claims_list_records('{"cell_id": 3, "source_type": "RAILS_TABLE_USERS"}')$$,
    '42501', 'permission denied for function claims_list_records', 'the role cannot call claims_list_records');

RESET ROLE;

-- A registered cell's role: no grant but the claims_cell that registration
-- gives it -------------------------------------------------------------------

CREATE ROLE claims_tap_cell NOLOGIN NOSUPERUSER;
CREATE ROLE claims_tap_other_cell NOLOGIN NOSUPERUSER;
SELECT lives_ok($$SELECT claims_register_cell(3, 'cell-3', 'claims_tap_cell')$$,
    'cell 3 is registered to the role claims_tap_cell');
SELECT lives_ok($$SELECT claims_register_cell(4, 'cell-4', 'claims_tap_other_cell')$$,
    'cell 4 is registered to another role');
SELECT ok(pg_has_role('claims_tap_cell', 'claims_cell', 'MEMBER'),
    'registration made the role a member of claims_cell');
SELECT table_privs_are('claims', 'claims_tap_cell', ARRAY[]::text[],
    'the cell''s role has no privilege on claims');
SELECT table_privs_are('claim_leases', 'claims_tap_cell', ARRAY[]::text[],
    'the cell''s role has no privilege on claim_leases');

SET LOCAL ROLE claims_tap_cell;
SELECT is(current_user::text, 'claims_tap_cell', 'the tests below run as the cell''s role');

-- A temporary table of the caller's named like an extension table must not
-- be picked up by the API (search_path is pinned, statements are qualified).
CREATE TEMP TABLE claims (uuid uuid, bucket_type integer, bucket_value text);
SET LOCAL search_path = pg_temp, public;

-- The API works for the cell: begin, commit, read, list, roll back.
SELECT claims_begin_update('{"cell_id": 3, "create_records": [
    {"bucket": {"type": "USERNAMES", "value": "plain-user"}, "subject": {"type": "USER", "id": 30},
     "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 30}}]}') ->> 'lease_uuid'
    AS plain_lease \gset
SELECT isnt(:'plain_lease'::text, NULL, 'the cell''s role can call claims_begin_update and gets a lease');
SELECT is(claims_list_leases('{"cell_id": 3}') #>> '{leases,0,uuid}', :'plain_lease'::text,
    'the cell''s role can call claims_list_leases');
SELECT lives_ok(format('SELECT claims_commit(3, %L)', :'plain_lease'),
    'the cell''s role can call claims_commit');
SELECT is(
    claims_get_record('{"bucket": {"type": "USERNAMES", "value": "plain-user"}}') #>> '{record,status}',
    'ACTIVE',
    'the cell''s role can call claims_get_record and sees the committed claim');
SELECT is(
    jsonb_array_length(claims_list_records('{"cell_id": 3, "source_type": "RAILS_TABLE_USERS"}') -> 'records'),
    1,
    'the cell''s role can call claims_list_records');

SELECT claims_begin_update('{"cell_id": 3, "create_records": [
    {"bucket": {"type": "USERNAMES", "value": "plain-user-2"}, "subject": {"type": "USER", "id": 31},
     "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 31}}]}') ->> 'lease_uuid'
    AS plain_lease_2 \gset
SELECT lives_ok(format('SELECT claims_rollback(3, %L)', :'plain_lease_2'),
    'the cell''s role can call claims_rollback');
SELECT is_empty($$SELECT * FROM pg_temp.claims$$,
    'the API did not write the caller''s temporary table named claims');
SELECT throws_ok($$SELECT * FROM public.claims$$, '42501', 'permission denied for table claims',
    'after the API calls the cell''s role still cannot read claims');
SELECT throws_ok($$SELECT claims_list_leases('{"cell_id": 4}')$$, '42501',
    'role "claims_tap_cell" may not act for cell 4',
    'the cell''s role is refused for another cell');

RESET ROLE;
RESET search_path;

SELECT isnt(current_user::text, 'claims_tap_cell', 'back to the owner');
SELECT results_eq(
    $$SELECT bucket_value COLLATE "default", creator_id, status::text, lease_uuid IS NULL
        FROM public.claims WHERE creator_id = 3 ORDER BY bucket_value$$,
    $$VALUES ('plain-user'::text, 3::bigint, 'ACTIVE'::text, true)$$,
    'the cell''s calls wrote the committed claim of cell 3, and the rollback left nothing');
SELECT results_eq(
    format($$SELECT state::text FROM public.claim_leases WHERE uuid IN (%L, %L) ORDER BY uuid = %L DESC$$,
           :'plain_lease', :'plain_lease_2', :'plain_lease'),
    $$VALUES ('committed'::text), ('rolled_back')$$,
    'the cell''s leases are committed and rolled back');

SELECT * FROM finish();
ROLLBACK;
