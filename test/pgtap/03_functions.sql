-- The SQL functions of the claims extension: signatures, attributes, NULL
-- handling, the claims.max_batch_size setting and the shape of answers.
BEGIN;
SELECT plan(93);

-- Calls for a cell need a registered cell, whoever makes them; this file runs
-- as a superuser (an administrator), so registering the cells it uses is
-- enough.
CREATE ROLE claims_tap_cells NOLOGIN;
SET LOCAL client_min_messages = warning;   -- "already a member of claims_cell"
SELECT count(claims_register_cell(id, 'cell-' || id, 'claims_tap_cells'))
  FROM unnest(ARRAY[1, 7, 8]) AS id \g /dev/null
RESET client_min_messages;

-- Signatures -----------------------------------------------------------------

SELECT has_function('claims_begin_update', ARRAY['jsonb']);
SELECT has_function('claims_commit', ARRAY['bigint', 'uuid']);
SELECT has_function('claims_rollback', ARRAY['bigint', 'uuid']);
SELECT has_function('claims_get_record', ARRAY['jsonb']);
SELECT has_function('claims_list_leases', ARRAY['jsonb']);
SELECT has_function('claims_list_records', ARRAY['jsonb']);
SELECT has_function('claims_registry_changed', ARRAY[]::name[]);

SELECT results_eq(
    $$SELECT p.oid::regprocedure::text COLLATE "default" FROM pg_proc p
       WHERE p.pronamespace = (SELECT extnamespace FROM pg_extension WHERE extname = 'claims')
         AND p.proname IN ('claims_begin_update', 'claims_commit', 'claims_rollback',
                           'claims_get_record', 'claims_list_leases', 'claims_list_records',
                           'claims_registry_changed')
       ORDER BY 1$$,
    $$VALUES ('claims_begin_update(jsonb)'::text),
             ('claims_commit(bigint,uuid)'),
             ('claims_commit(jsonb)'),
             ('claims_get_record(jsonb)'),
             ('claims_list_leases(jsonb)'),
             ('claims_list_records(jsonb)'),
             ('claims_registry_changed()'),
             ('claims_rollback(bigint,uuid)'),
             ('claims_rollback(jsonb)')$$,
    'each API function exists once, commit and rollback with their proto3 JSON overloads, no others');

SELECT results_eq(
    $$SELECT proname::text COLLATE "default", proargnames::text[] COLLATE "default"
        FROM pg_proc
       WHERE oid IN ('claims_begin_update(jsonb)'::regprocedure, 'claims_commit(bigint,uuid)'::regprocedure,
                     'claims_rollback(bigint,uuid)'::regprocedure, 'claims_get_record(jsonb)'::regprocedure,
                     'claims_list_leases(jsonb)'::regprocedure, 'claims_list_records(jsonb)'::regprocedure)
       ORDER BY 1$$,
    $$VALUES ('claims_begin_update'::text, '{request}'::text[]),
             ('claims_commit', '{cell_id,lease_uuid}'),
             ('claims_get_record', '{request}'),
             ('claims_list_leases', '{request}'),
             ('claims_list_records', '{request}'),
             ('claims_rollback', '{cell_id,lease_uuid}')$$,
    'the API functions have the documented argument names');

SELECT function_returns('claims_begin_update', ARRAY['jsonb'], 'jsonb');
SELECT function_returns('claims_commit', ARRAY['bigint', 'uuid'], 'void');
SELECT function_returns('claims_rollback', ARRAY['bigint', 'uuid'], 'void');
SELECT function_returns('claims_get_record', ARRAY['jsonb'], 'jsonb');
SELECT function_returns('claims_list_leases', ARRAY['jsonb'], 'jsonb');
SELECT function_returns('claims_list_records', ARRAY['jsonb'], 'jsonb');
SELECT function_returns('claims_registry_changed', ARRAY[]::name[], 'trigger');

SELECT function_lang_is('claims_begin_update', ARRAY['jsonb'], 'c');
SELECT function_lang_is('claims_commit', ARRAY['bigint', 'uuid'], 'c');
SELECT function_lang_is('claims_rollback', ARRAY['bigint', 'uuid'], 'c');
SELECT function_lang_is('claims_get_record', ARRAY['jsonb'], 'c');
SELECT function_lang_is('claims_list_leases', ARRAY['jsonb'], 'c');
SELECT function_lang_is('claims_list_records', ARRAY['jsonb'], 'c');

-- Volatility, parallel safety, SECURITY DEFINER, strictness -------------------

SELECT volatility_is('claims_begin_update', ARRAY['jsonb'], 'volatile');
SELECT volatility_is('claims_commit', ARRAY['bigint', 'uuid'], 'volatile');
SELECT volatility_is('claims_rollback', ARRAY['bigint', 'uuid'], 'volatile');
SELECT volatility_is('claims_get_record', ARRAY['jsonb'], 'stable');
SELECT volatility_is('claims_list_leases', ARRAY['jsonb'], 'stable');
SELECT volatility_is('claims_list_records', ARRAY['jsonb'], 'stable');

SELECT results_eq(
    $$SELECT proname::text COLLATE "default", proparallel::text FROM pg_proc
       WHERE oid IN ('claims_begin_update(jsonb)'::regprocedure, 'claims_commit(bigint,uuid)'::regprocedure,
                     'claims_rollback(bigint,uuid)'::regprocedure, 'claims_get_record(jsonb)'::regprocedure,
                     'claims_list_leases(jsonb)'::regprocedure, 'claims_list_records(jsonb)'::regprocedure)
       ORDER BY 1$$,
    $$VALUES ('claims_begin_update'::text, 'u'::text),
             ('claims_commit', 'u'),
             ('claims_get_record', 'r'),
             ('claims_list_leases', 'r'),
             ('claims_list_records', 'r'),
             ('claims_rollback', 'u')$$,
    'writing functions are PARALLEL UNSAFE, reading functions PARALLEL RESTRICTED');

-- The API functions are not SECURITY DEFINER: each judges the role that
-- called it, then switches to the extension owner for its statements.
SELECT isnt_definer('claims_begin_update', ARRAY['jsonb']);
SELECT isnt_definer('claims_commit', ARRAY['bigint', 'uuid']);
SELECT isnt_definer('claims_rollback', ARRAY['bigint', 'uuid']);
SELECT isnt_definer('claims_get_record', ARRAY['jsonb']);
SELECT isnt_definer('claims_list_leases', ARRAY['jsonb']);
SELECT isnt_definer('claims_list_records', ARRAY['jsonb']);
SELECT isnt_definer('claims_registry_changed', ARRAY[]::name[]);

-- The guard of the built-in registry rows: a plpgsql trigger function that
-- runs as the role writing the registry, with its search path pinned.
SELECT has_function('claims_builtin_types_guard', ARRAY[]::name[]);
SELECT function_returns('claims_builtin_types_guard', ARRAY[]::name[], 'trigger');
SELECT function_lang_is('claims_builtin_types_guard', ARRAY[]::name[], 'plpgsql');
SELECT isnt_definer('claims_builtin_types_guard', ARRAY[]::name[]);
SELECT is((SELECT proconfig FROM pg_proc WHERE oid = 'claims_builtin_types_guard()'::regprocedure),
    ARRAY['search_path=pg_catalog, pg_temp'],
    'claims_builtin_types_guard() pins its search_path');

SELECT isnt_strict('claims_begin_update', ARRAY['jsonb']);
SELECT isnt_strict('claims_commit', ARRAY['bigint', 'uuid']);
SELECT isnt_strict('claims_rollback', ARRAY['bigint', 'uuid']);
SELECT isnt_strict('claims_get_record', ARRAY['jsonb']);
SELECT isnt_strict('claims_list_leases', ARRAY['jsonb']);
SELECT isnt_strict('claims_list_records', ARRAY['jsonb']);

-- Pinned search path ------------------------------------------------------------
-- The API functions pin the search path to pg_catalog for the length of a
-- call (the attack on it is 21_search_path_attack.sql) and must give the
-- caller's path back on return and on error: after each call an unqualified
-- name of the extension still resolves through the caller's search_path.

SELECT current_setting('search_path') AS caller_path \gset

SELECT claims_begin_update('{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", "value": "path-1"},
    "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')
    ->> 'lease_uuid' AS path_lease \gset
SELECT lives_ok($$SELECT count(*) FROM claim_leases$$, 'the caller''s search path is back after claims_begin_update');
SELECT claims_commit(1, :'path_lease') \g /dev/null
SELECT lives_ok($$SELECT count(*) FROM claim_leases$$, 'the caller''s search path is back after claims_commit');
SELECT claims_begin_update('{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", "value": "path-2"},
    "subject": {"type": "USER", "id": 2}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 2}}]}')
    ->> 'lease_uuid' AS path_lease \gset
SELECT claims_rollback(1, :'path_lease') \g /dev/null
SELECT lives_ok($$SELECT count(*) FROM claim_leases$$, 'the caller''s search path is back after claims_rollback');
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "path-1"}}') \g /dev/null
SELECT lives_ok($$SELECT count(*) FROM claim_leases$$, 'the caller''s search path is back after claims_get_record');
SELECT claims_list_leases('{"cell_id": 1}') \g /dev/null
SELECT lives_ok($$SELECT count(*) FROM claim_leases$$, 'the caller''s search path is back after claims_list_leases');
SELECT claims_list_records('{"cell_id": 1, "source_type": "RAILS_TABLE_USERS"}') \g /dev/null
SELECT lives_ok($$SELECT count(*) FROM claim_leases$$, 'the caller''s search path is back after claims_list_records');
SELECT throws_ok($$SELECT claims_commit(1, '00000000-0000-0000-0000-000000000000')$$, 'P0002', NULL,
    'a failing call (its subtransaction rolled back) ...');
SELECT lives_ok($$SELECT count(*) FROM claim_leases$$, '... gives the caller''s search path back as well');
SELECT is(current_setting('search_path'), :'caller_path',
    'search_path reads as the caller set it after every call, failed or not');
SET LOCAL search_path = '';
SELECT public.claims_get_record('{"bucket": {"type": "USERNAMES", "value": "path-1"}}') ->> 'record' IS NOT NULL
    AS path_found \gset
RESET search_path;
SELECT ok(:'path_found', 'the API works with an empty search_path');

SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_proc p
        JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
        JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'claims'
       WHERE p.prosecdef
         AND p.proconfig IS DISTINCT FROM ARRAY['search_path=pg_catalog, pg_temp']$$,
    'every SECURITY DEFINER function of the extension pins search_path');

-- SECURITY DEFINER functions run as their owner, and the API functions switch
-- to theirs: the extension owner, a superuser.
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_proc p, pg_extension e
       WHERE e.extname = 'claims' AND p.pronamespace = e.extnamespace
         AND p.proname LIKE 'claim%' AND p.proowner <> e.extowner$$,
    'every claims function is owned by the extension owner');
SELECT ok(
    (SELECT r.rolsuper FROM pg_extension e JOIN pg_roles r ON r.oid = e.extowner
      WHERE e.extname = 'claims'),
    'the extension owner is a superuser');

-- NULL arguments raise 22004 ---------------------------------------------------

SELECT throws_ok($$SELECT claims_begin_update(NULL)$$, '22004', NULL,
    'claims_begin_update(NULL) raises 22004');
SELECT throws_ok($$SELECT claims_commit(NULL, '00000000-0000-4000-8000-000000000001')$$, '22004', NULL,
    'claims_commit with a NULL cell_id raises 22004');
SELECT throws_ok($$SELECT claims_commit(1, NULL)$$, '22004', NULL,
    'claims_commit with a NULL lease_uuid raises 22004');
SELECT throws_ok($$SELECT claims_rollback(NULL, '00000000-0000-4000-8000-000000000001')$$, '22004', NULL,
    'claims_rollback with a NULL cell_id raises 22004');
SELECT throws_ok($$SELECT claims_rollback(1, NULL)$$, '22004', NULL,
    'claims_rollback with a NULL lease_uuid raises 22004');
SELECT throws_ok($$SELECT claims_get_record(NULL)$$, '22004', NULL,
    'claims_get_record(NULL) raises 22004');
SELECT throws_ok($$SELECT claims_list_leases(NULL)$$, '22004', NULL,
    'claims_list_leases(NULL) raises 22004');
SELECT throws_ok($$SELECT claims_list_records(NULL)$$, '22004', NULL,
    'claims_list_records(NULL) raises 22004');
-- JSON null is not SQL NULL: it is a malformed request.
SELECT throws_ok($$SELECT claims_get_record('null')$$, '22023', NULL,
    'claims_get_record with a JSON null request raises 22023');

-- claims.max_batch_size ----------------------------------------------------------

SELECT is(current_setting('claims.max_batch_size'), '1000', 'claims.max_batch_size defaults to 1000');
SELECT results_eq(
    $$SELECT context::text COLLATE "default", vartype::text COLLATE "default", boot_val::text COLLATE "default"
        FROM pg_settings WHERE name = 'claims.max_batch_size'$$,
    $$VALUES ('superuser'::text, 'integer'::text, '1000'::text)$$,
    'claims.max_batch_size is a superuser-settable integer with boot value 1000');

SET LOCAL claims.max_batch_size = 2;
SELECT throws_ok(
    $$SELECT claims_begin_update('{"cell_id": 1, "create_records": [
        {"bucket": {"type": "USERNAMES", "value": "b1"}, "subject": {"type": "USER", "id": 1},
         "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}},
        {"bucket": {"type": "USERNAMES", "value": "b2"}, "subject": {"type": "USER", "id": 2},
         "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 2}},
        {"bucket": {"type": "USERNAMES", "value": "b3"}, "subject": {"type": "USER", "id": 3},
         "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 3}}]}')$$,
    '54000', NULL,
    'a batch of three records over claims.max_batch_size = 2 raises 54000');
SELECT lives_ok(
    $$SELECT claims_begin_update('{"cell_id": 1, "create_records": [
        {"bucket": {"type": "USERNAMES", "value": "b1"}, "subject": {"type": "USER", "id": 1},
         "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}},
        {"bucket": {"type": "USERNAMES", "value": "b2"}, "subject": {"type": "USER", "id": 2},
         "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 2}}]}')$$,
    'a batch of two records under claims.max_batch_size = 2 is accepted');
RESET claims.max_batch_size;
SELECT is(current_setting('claims.max_batch_size'), '1000', 'claims.max_batch_size is back to 1000');

-- Answers -----------------------------------------------------------------------

SELECT claims_begin_update('{"cell_id": 7, "create_records": [
    {"bucket": {"type": "EMAILS", "value": "a@example.com"}, "subject": {"type": "USER", "id": 70},
     "source": {"type": "RAILS_TABLE_EMAILS", "rails_primary_key_id": 70}}]}') AS begin_answer \gset

SELECT is(
    (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(:'begin_answer'::jsonb) AS k),
    ARRAY['cell_id', 'lease_uuid'],
    'claims_begin_update answers with cell_id and lease_uuid only');
SELECT is(:'begin_answer'::jsonb -> 'cell_id', '"7"'::jsonb,
    'cell_id is answered as a decimal string (proto3 int64)');
SELECT is(
    (SELECT count(*)::integer FROM claim_leases
      WHERE uuid = (:'begin_answer'::jsonb ->> 'lease_uuid')::uuid AND creator_id = 7
        AND state = 'outstanding'),
    1,
    'lease_uuid names the outstanding lease of cell 7');
SELECT is(
    claims_list_leases('{"cell_id": 7}') #>> '{leases,0,uuid}',
    :'begin_answer'::jsonb ->> 'lease_uuid',
    'claims_list_leases lists the outstanding lease');
SELECT is(
    claims_get_record('{"claim": {"email": "a@example.com"}}') #>> '{record,status}',
    'LEASE_CREATING',
    'claims_get_record shows the leased create as LEASE_CREATING');

SELECT throws_ok(
    format('SELECT claims_commit(8, %L)', :'begin_answer'::jsonb ->> 'lease_uuid'),
    '42501', NULL,
    'claims_commit of another cell''s lease raises 42501');
SELECT lives_ok(
    format('SELECT claims_commit(7, %L)', :'begin_answer'::jsonb ->> 'lease_uuid'),
    'claims_commit(cell_id, lease_uuid) commits the lease');
SELECT is(
    (SELECT claims_commit(cell_id => 7, lease_uuid => (:'begin_answer'::jsonb ->> 'lease_uuid')::uuid))::text,
    '',
    'a second commit, with named arguments, succeeds and returns void');
SELECT throws_ok(
    format('SELECT claims_rollback(7, %L)', :'begin_answer'::jsonb ->> 'lease_uuid'),
    '55000', NULL,
    'claims_rollback of a committed lease raises 55000');
SELECT throws_ok(
    $$SELECT claims_commit(7, '00000000-0000-4000-8000-00000000dead')$$,
    'P0002', NULL,
    'claims_commit of an unknown lease raises P0002');

SELECT is(
    claims_get_record('{"claim": {"email": "a@example.com"}}') #>> '{record,status}',
    'ACTIVE',
    'after the commit the record is ACTIVE');
SELECT is(claims_get_record('{"claim": {"email": "nobody@example.com"}}'), NULL::jsonb,
    'claims_get_record answers NULL for an unclaimed value');
SELECT is(claims_list_leases('{"cell_id": 7}'), '{"leases": []}'::jsonb,
    'claims_list_leases answers an empty list when nothing is outstanding');
SELECT is(
    claims_list_records('{"cell_id": 7, "source_type": "RAILS_TABLE_EMAILS"}') - 'records',
    '{"truncated": false}'::jsonb,
    'claims_list_records answers records and truncated');
SELECT is(
    jsonb_array_length(claims_list_records('{"cell_id": 7, "source_type": "RAILS_TABLE_EMAILS"}') -> 'records'),
    1,
    'claims_list_records lists the committed record');

-- Malformed requests ----------------------------------------------------------

SELECT throws_ok($$SELECT claims_get_record('{"bucket": {"type": "EMAILS", "value": "x"}, "bogus": 1}')$$,
    '22023', NULL, 'an unknown field raises 22023');
SELECT throws_like($$SELECT claims_get_record('{"bucket": {"type": "EMAILS", "value": "x"}, "bogus": 1}')$$,
    'invalid request at $.%', 'the message of a malformed request names the JSON path');
SELECT throws_ok($$SELECT claims_list_leases('{"cell_id": 7, "limit": -1}')$$,
    '22023', NULL, 'a negative ListLeases limit raises 22023');
SELECT throws_ok($$SELECT claims_begin_update('[]')$$,
    '22023', NULL, 'a request that is not a JSON object raises 22023');

SELECT * FROM finish();
ROLLBACK;
