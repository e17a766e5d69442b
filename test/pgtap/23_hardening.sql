-- Hardening: values never reach SQL text (they are stored verbatim and do
-- nothing else), and no code a cell writes can make the extension act with
-- another role's cell privileges.
BEGIN;
SELECT plan(35);

CREATE ROLE sec23_cell1 LOGIN;
CREATE ROLE sec23_cell2 LOGIN;
CREATE ROLE sec23_admin LOGIN IN ROLE claims_admin;
CREATE ROLE "sec23 O'Hara ""cell"" ; DROP ROLE sec23_admin; --" LOGIN;
SELECT lives_ok($$SELECT claims_register_cell(1, 'sec23-one', 'sec23_cell1')$$, 'register cell 1');
SELECT lives_ok($$SELECT claims_register_cell(2, 'sec23-two', 'sec23_cell2')$$, 'register cell 2');
DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO sec23_cell1', current_database()); END $$;

CREATE FUNCTION sec23_state() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT format('claims=%s leases=%s cells=%s actions=%s', (SELECT count(*) FROM claims),
        (SELECT count(*) FROM claim_leases), (SELECT count(*) FROM claim_cells), (SELECT count(*) FROM claim_admin_actions))
$$;

-- Values that look like SQL are data ------------------------------------------------
SET ROLE sec23_cell1;
SELECT lives_ok($q$SELECT claims_begin_update(jsonb_build_object('cell_id', 1,
        'lease_uuid', '23000000-0000-4000-8000-000000000101',
        'create_records', jsonb_build_array(
            jsonb_build_object('claim', jsonb_build_object('username', 'x''); DELETE FROM public.claims; --'),
                'subject', jsonb_build_object('type', 'USER', 'id', 1),
                'source', jsonb_build_object('type', 'RAILS_TABLE_USERS', 'rails_primary_key_id', 'Jzsgc2VsZWN0IDE7IC0t'),
                'user_data', jsonb_build_object(''' ; TRUNCATE public.claim_leases; --', '$$ \\ "q" $x$ E''\\x00''')),
            jsonb_build_object('claim', jsonb_build_object('email', '"a"@b; DROP TABLE public.claim_cells; --'),
                'subject', jsonb_build_object('type', 'USER', 'id', 1),
                'source', jsonb_build_object('type', 'RAILS_TABLE_EMAILS', 'rails_primary_key_id', 2)),
            jsonb_build_object('claim', jsonb_build_object('route', '%s%n%x\\'' || pg_sleep(5) || '''),
                'subject', jsonb_build_object('type', 'NAMESPACE', 'id', 1),
                'source', jsonb_build_object('type', 'RAILS_TABLE_ROUTES', 'rails_primary_key_id', 3)))))$q$,
    'a batch of SQL-looking values is accepted as data');
SELECT lives_ok($$SELECT claims_commit(1, '23000000-0000-4000-8000-000000000101')$$, 'and committed');
SELECT is(claims_get_record('{"claim": {"username": "x''); DELETE FROM public.claims; --"}}') #>> '{record,metadata,claim,username}',
    'x''); DELETE FROM public.claims; --', 'the username reads back verbatim');
SELECT is(claims_get_record('{"claim": {"username": "x''); DELETE FROM public.claims; --"}}') #> '{record,metadata,user_data}',
    jsonb_build_object(''' ; TRUNCATE public.claim_leases; --', '$$ \\ "q" $x$ E''\\x00'''), 'the user data reads back verbatim');
SELECT is(claims_get_record('{"claim": {"username": "x''); DELETE FROM public.claims; --"}}') #>> '{record,metadata,source,rails_primary_key_id}',
    'Jzsgc2VsZWN0IDE7IC0t', 'the source id reads back verbatim');
SELECT is(claims_get_record('{"claim": {"email": "\"a\"@b; DROP TABLE public.claim_cells; --"}}') #>> '{record,status}',
    'ACTIVE', 'the email reads back');
SELECT is(claims_get_record(jsonb_build_object('claim', jsonb_build_object('route', '%s%n%x\\'' || pg_sleep(5) || ''')))
    #>> '{record,metadata,claim,route}', '%s%n%x\\'' || pg_sleep(5) || ''', 'the route reads back verbatim');
SELECT is(claims_get_record('{"claim": {"username": "x''); DELETE FROM public.claims; --x"}}'), NULL,
    'a value differing by one character is another value');
RESET ROLE;
SELECT is(sec23_state(), 'claims=3 leases=1 cells=2 actions=2', 'nothing but the three claims and their lease was written');

-- Administrator inputs are data too.
SET ROLE sec23_admin;
SELECT lives_ok($$SELECT claims_register_cell(3, '''); DROP TABLE public.claims; --',
    'sec23 O''Hara "cell" ; DROP ROLE sec23_admin; --', 'because''); DELETE FROM public.claim_admin_actions; --')$$,
    'register a cell whose name, role name and reason look like SQL');
SELECT lives_ok($q$SELECT claims_rename_cell(3, 'sec23-three $$ || pg_sleep(5) || $$', '%I %L %s')$q$,
    'rename it to a name that looks like SQL');
RESET ROLE;
SELECT results_eq($$SELECT name, role_name FROM claim_cells WHERE cell_id = 3$$,
    $$VALUES ('sec23-three $' || '$ || pg_sleep(5) || $' || '$', 'sec23 O''Hara "cell" ; DROP ROLE sec23_admin; --')$$,
    'the registry holds the strings verbatim');
SELECT results_eq($$SELECT reason FROM claim_admin_actions WHERE cell_id = 3 ORDER BY action_id$$,
    $$VALUES ('because''); DELETE FROM public.claim_admin_actions; --'), ('%I %L %s')$$,
    'the audit log holds the reasons verbatim');
SELECT ok(pg_has_role('sec23 O''Hara "cell" ; DROP ROLE sec23_admin; --', 'claims_cell', 'MEMBER'),
    'claims_cell was granted to exactly the quoted role');
SELECT ok(EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'sec23_admin'), 'and no other statement ran');
SET ROLE "sec23 O'Hara ""cell"" ; DROP ROLE sec23_admin; --";
SELECT lives_ok($$SELECT claims_list_leases('{"cell_id": 3}')$$, 'the quoted role acts for its cell');
SELECT throws_ok($$SELECT claims_list_leases('{"cell_id": 1}')$$, '42501', NULL, '... and for no other');
RESET ROLE;
SET ROLE sec23_admin;
SELECT throws_ok($$SELECT claims_register_cell(4, 'sec23-four', 'sec23_cell1; GRANT claims_admin TO sec23_cell1')$$,
    '42704', NULL, 'a role name carrying a statement is an unknown role');
RESET ROLE;
SELECT ok(NOT pg_has_role('sec23_cell1', 'claims_admin', 'MEMBER'), 'sec23_cell1 did not become an administrator');

-- Code of a cell that others run ------------------------------------------------------
-- Maintenance commands (REINDEX, ANALYZE, CREATE INDEX, REFRESH MATERIALIZED
-- VIEW, autovacuum) run a table owner's index expressions and views as that
-- owner, inside a security-restricted operation, while the session's role is
-- whoever started the command, often a superuser. Such code must not reach
-- the extension with the session role's privileges.
SET ROLE sec23_cell1;
CREATE SCHEMA sec23;
CREATE TABLE sec23.armed (on_ boolean);
INSERT INTO sec23.armed VALUES (false);
CREATE FUNCTION sec23.trojan(x integer) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
    IF (SELECT on_ FROM sec23.armed) THEN
        PERFORM public.claims_begin_update('{"cell_id": 2, "lease_uuid": "23000000-0000-4000-8000-00000000bad1",
            "create_records": [{"claim": {"username": "sec23-stolen"}, "subject": {"type": "USER", "id": 1},
                                "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}');
    END IF;
    RETURN x;
END
$f$;
CREATE TABLE sec23.t (x integer);
CREATE INDEX t_trojan ON sec23.t (sec23.trojan(x));
INSERT INTO sec23.t VALUES (1);
CREATE MATERIALIZED VIEW sec23.mv AS SELECT sec23.trojan(x) AS y FROM sec23.t;
UPDATE sec23.armed SET on_ = true;
RESET ROLE;
SELECT throws_ok($$REINDEX TABLE sec23.t$$, '42501', 'claims functions cannot run inside a security-restricted operation',
    'REINDEX by a superuser: the index expression is refused');
SELECT throws_ok($$ANALYZE sec23.t$$, '42501', 'claims functions cannot run inside a security-restricted operation',
    'ANALYZE by a superuser: the index expression is refused');
SELECT throws_ok($$CREATE INDEX ON sec23.t (sec23.trojan(x + 0))$$, '42501',
    'claims functions cannot run inside a security-restricted operation',
    'CREATE INDEX by a superuser on the cell''s table: refused');
SELECT throws_ok($$REFRESH MATERIALIZED VIEW sec23.mv$$, '42501',
    'claims functions cannot run inside a security-restricted operation',
    'REFRESH MATERIALIZED VIEW by a superuser: refused');
SELECT is((SELECT count(*) FROM claim_leases WHERE creator_id = 2), 0::bigint, 'cell 2 got no lease from cell 1''s code');

-- A SECURITY DEFINER function of cell 1 runs with cell 1's rights, whoever
-- calls it: the API judges the role that called it (the function's owner),
-- so the function acts for cell 1 and for no other cell, even when cell 2 or
-- an administrator runs it.
SET ROLE sec23_cell1;
CREATE FUNCTION sec23.helper(cell bigint, lease uuid, username text) RETURNS jsonb
LANGUAGE sql SECURITY DEFINER AS $f$
    SELECT public.claims_begin_update(jsonb_build_object('cell_id', cell, 'lease_uuid', lease,
        'create_records', jsonb_build_array(jsonb_build_object(
            'claim', jsonb_build_object('username', username),
            'subject', jsonb_build_object('type', 'USER', 'id', 1),
            'source', jsonb_build_object('type', 'RAILS_TABLE_USERS', 'rails_primary_key_id', 1)))))
$f$;
GRANT USAGE ON SCHEMA sec23 TO PUBLIC;
GRANT EXECUTE ON FUNCTION sec23.helper(bigint, uuid, text) TO PUBLIC;
RESET ROLE;
SET ROLE sec23_cell2;
SELECT throws_ok($$SELECT sec23.helper(2, '23000000-0000-4000-8000-00000000bad2', 'sec23-stolen-2')$$,
    '42501', 'role "sec23_cell1" may not act for cell 2',
    'cell 1''s SECURITY DEFINER function run by cell 2 cannot act for cell 2: it acts as cell 1');
RESET ROLE;
SET ROLE sec23_admin;
SELECT throws_ok($$SELECT sec23.helper(2, '23000000-0000-4000-8000-00000000bad3', 'sec23-stolen-3')$$,
    '42501', 'role "sec23_cell1" may not act for cell 2',
    '... nor when an administrator runs it');
RESET ROLE;
SELECT throws_ok($$SELECT sec23.helper(2, '23000000-0000-4000-8000-00000000bad4', 'sec23-stolen-4')$$,
    '42501', 'role "sec23_cell1" may not act for cell 2',
    '... nor when a superuser runs it');
SELECT is((SELECT count(*) FROM claim_leases WHERE creator_id = 2), 0::bigint,
    'cell 2 got no lease from cell 1''s SECURITY DEFINER function');
SET ROLE sec23_cell1;
SELECT is(sec23.helper(1, '23000000-0000-4000-8000-000000000102', 'sec23-own') ->> 'cell_id', '1',
    'run by cell 1, its function acts for cell 1');
RESET ROLE;
SET ROLE sec23_cell2;
SELECT is(sec23.helper(1, '23000000-0000-4000-8000-000000000103', 'sec23-own-2') ->> 'cell_id', '1',
    'run by cell 2, it still acts for cell 1, its owner''s cell');
RESET ROLE;
SELECT results_eq(
    $$SELECT uuid::text, creator_id FROM claim_leases WHERE uuid::text LIKE '23000000-%' ORDER BY uuid$$,
    $$VALUES ('23000000-0000-4000-8000-000000000101'::text, 1::bigint),
             ('23000000-0000-4000-8000-000000000102', 1),
             ('23000000-0000-4000-8000-000000000103', 1)$$,
    'the only leases written are cell 1''s');

-- Internal functions are not callable.
SET ROLE sec23_cell1;
SELECT throws_ok($$SELECT claims_registry_changed()$$, '42501', NULL, 'claims_registry_changed() is not executable');
SELECT throws_ok($$SELECT claims_audit('x', 1, NULL, 'x', '{}')$$, '42501', NULL, 'claims_audit() is not executable');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
