-- Who may call what: every API function, every administrator function and
-- every direct table access, tried as every kind of role. A refused attempt
-- must fail with the expected SQLSTATE (42501 unless noted) and leave every
-- table of the extension exactly as it was (checked as superuser).
--
-- Roles (created here, removed by the final ROLLBACK):
--   sec20_cell1      the role cell 1 is registered with
--   sec20_cell2      the role cell 2 is registered with
--   sec20_router     member of claims_router
--   sec20_admin      member of claims_admin
--   sec20_nobody     no grants at all
--   sec20_member     inherits sec20_cell1 (an application role of cell 1)
--   sec20_noinherit  NOINHERIT member of sec20_cell1 (has its privileges only after SET ROLE)
BEGIN;
SELECT plan(824);

CREATE ROLE sec20_cell1 LOGIN;
CREATE ROLE sec20_cell2 LOGIN;
CREATE ROLE sec20_cell3 LOGIN;
CREATE ROLE sec20_router LOGIN IN ROLE claims_router;
CREATE ROLE sec20_admin LOGIN IN ROLE claims_admin;
CREATE ROLE sec20_nobody LOGIN;
CREATE ROLE sec20_member LOGIN IN ROLE sec20_cell1;
CREATE ROLE sec20_noinherit LOGIN NOINHERIT IN ROLE sec20_cell1;

-- Helpers (superuser objects in this transaction only).
-- sec20_req: a BeginUpdate request for one USERNAMES value.
CREATE FUNCTION sec20_req(cell bigint, lease text, username text, destroy boolean DEFAULT false)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'cell_id', cell,
        'lease_uuid', lease,
        CASE WHEN destroy THEN 'destroy_records' ELSE 'create_records' END,
        jsonb_build_array(CASE WHEN destroy
            THEN jsonb_build_object('bucket', jsonb_build_object('type', 'USERNAMES', 'value', username))
            ELSE jsonb_build_object(
                'bucket', jsonb_build_object('type', 'USERNAMES', 'value', username),
                'subject', jsonb_build_object('type', 'USER', 'id', 7),
                'source', jsonb_build_object('type', 'RAILS_TABLE_USERS', 'rails_primary_key_id', 7))
            END)))
$$;
-- sec20_state: row counts and a fingerprint of every table of the extension.
CREATE FUNCTION sec20_state() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT format('claims=%s leases=%s cells=%s actions=%s md5=%s',
        (SELECT count(*) FROM claims), (SELECT count(*) FROM claim_leases),
        (SELECT count(*) FROM claim_cells), (SELECT count(*) FROM claim_admin_actions),
        md5(concat_ws('#',
            (SELECT string_agg(c::text, '|' ORDER BY c.uuid) FROM claims c),
            (SELECT string_agg(l::text, '|' ORDER BY l.uuid) FROM claim_leases l),
            (SELECT string_agg(c::text, '|' ORDER BY c.cell_id) FROM claim_cells c),
            (SELECT string_agg(a::text, '|' ORDER BY a.action_id) FROM claim_admin_actions a),
            (SELECT string_agg(b::text, '|' ORDER BY b.type_id) FROM claim_bucket_types b),
            (SELECT last_value::text FROM claim_admin_actions_action_id_seq))))
$$;

-- Secure by default: before any registration nobody may act for cell 1.
SET ROLE sec20_cell1;
SELECT throws_ok($$SELECT claims_begin_update(sec20_req(1, NULL, 'sec20-early'))$$, '42501', NULL,
    'before registration: cell 1''s own role is refused for cell 1');
RESET ROLE;
SELECT throws_ok($$SELECT claims_begin_update(sec20_req(1, NULL, 'sec20-early'))$$, '42501', NULL,
    'before registration: even a superuser is refused for cell 1');

SELECT lives_ok($$SELECT claims_register_cell(1, 'sec20-one', 'sec20_cell1', 'roles matrix')$$,
    'register cell 1 with role sec20_cell1');
SELECT lives_ok($$SELECT claims_register_cell(2, 'sec20-two', 'sec20_cell2', 'roles matrix')$$,
    'register cell 2 with role sec20_cell2');

-- Data every role is tried against (fixed lease uuids).
--   cell 1: sec20-c1-active (committed), leases 101 (to commit), 102 (to roll back), 103 (kept)
--   cell 2: sec20-c2-active (committed), leases 201 (to commit), 202 (to roll back),
--           203 (force-finished by the administrator), 204 (kept)
SET ROLE sec20_cell1;
SELECT is(claims_begin_update(sec20_req(1, '20000000-0000-4000-8000-000000000100', 'sec20-c1-active')),
    '{"cell_id": "1", "lease_uuid": "20000000-0000-4000-8000-000000000100"}'::jsonb,
    'cell 1 begins a lease for cell 1');
SELECT lives_ok($$SELECT claims_commit(1, '20000000-0000-4000-8000-000000000100')$$, 'cell 1 commits its lease');
SELECT lives_ok($$SELECT claims_begin_update(sec20_req(1, '20000000-0000-4000-8000-000000000101', 'sec20-c1-101'))$$,
    'cell 1 begins lease 101');
SELECT lives_ok($$SELECT claims_begin_update(sec20_req(1, '20000000-0000-4000-8000-000000000102', 'sec20-c1-102'))$$,
    'cell 1 begins lease 102');
SELECT lives_ok($$SELECT claims_begin_update(sec20_req(1, '20000000-0000-4000-8000-000000000103', 'sec20-c1-103'))$$,
    'cell 1 begins lease 103');
RESET ROLE;
SET ROLE sec20_cell2;
SELECT is(claims_begin_update(sec20_req(2, '20000000-0000-4000-8000-000000000200', 'sec20-c2-active')),
    '{"cell_id": "2", "lease_uuid": "20000000-0000-4000-8000-000000000200"}'::jsonb,
    'cell 2 begins a lease for cell 2');
SELECT lives_ok($$SELECT claims_commit(2, '20000000-0000-4000-8000-000000000200')$$, 'cell 2 commits its lease');
SELECT lives_ok($$SELECT claims_begin_update(sec20_req(2, '20000000-0000-4000-8000-000000000201', 'sec20-c2-201'))$$,
    'cell 2 begins lease 201');
SELECT lives_ok($$SELECT claims_begin_update(sec20_req(2, '20000000-0000-4000-8000-000000000202', 'sec20-c2-202'))$$,
    'cell 2 begins lease 202');
SELECT lives_ok($$SELECT claims_begin_update(sec20_req(2, '20000000-0000-4000-8000-000000000203', 'sec20-c2-203'))$$,
    'cell 2 begins lease 203');
SELECT lives_ok($$SELECT claims_begin_update(sec20_req(2, '20000000-0000-4000-8000-000000000204', 'sec20-c2-204'))$$,
    'cell 2 begins lease 204');
RESET ROLE;

-- The matrix: one row per operation; "allowed" lists the roles that may do
-- it, every other role must be refused with "refused" (42501 unless noted).
-- {role} in the statement is replaced by the role tried, so that allowed
-- creates do not collide.
CREATE TABLE sec20_matrix (
    n       serial,
    op      text NOT NULL,
    stmt    text NOT NULL,
    allowed text[] NOT NULL,
    refused text NOT NULL DEFAULT '42501'
);
INSERT INTO sec20_matrix (op, stmt, allowed, refused) VALUES
    -- API functions
    ('claims_begin_update for cell 1',
     $$SELECT claims_begin_update(sec20_req(1, NULL, 'sec20-new-1-{role}'))$$, '{cell1,admin,member}', '42501'),
    ('claims_begin_update for cell 2',
     $$SELECT claims_begin_update(sec20_req(2, NULL, 'sec20-new-2-{role}'))$$, '{cell2,admin}', '42501'),
    ('claims_begin_update for unregistered cell 99',
     $$SELECT claims_begin_update(sec20_req(99, NULL, 'sec20-new-99-{role}'))$$, '{}', '42501'),
    ('claims_begin_update for cell 1 destroying cell 2''s value',
     $$SELECT claims_begin_update(sec20_req(1, NULL, 'sec20-c2-active', true))$$, '{}', '42501'),
    ('claims_begin_update for cell 1 reusing cell 2''s lease uuid',
     $$SELECT claims_begin_update(sec20_req(1, '20000000-0000-4000-8000-000000000204', 'sec20-c2-204'))$$, '{}', '42501'),
    ('claims_commit of cell 1''s lease',
     $$SELECT claims_commit(1, '20000000-0000-4000-8000-000000000101')$$, '{cell1,admin,member}', '42501'),
    ('claims_rollback of cell 1''s lease',
     $$SELECT claims_rollback(1, '20000000-0000-4000-8000-000000000102')$$, '{cell1,admin,member}', '42501'),
    ('claims_commit of cell 2''s lease',
     $$SELECT claims_commit(2, '20000000-0000-4000-8000-000000000201')$$, '{cell2,admin}', '42501'),
    ('claims_rollback of cell 2''s lease',
     $$SELECT claims_rollback(2, '20000000-0000-4000-8000-000000000202')$$, '{cell2,admin}', '42501'),
    ('claims_commit of cell 2''s lease named as cell 1''s',
     $$SELECT claims_commit(1, '20000000-0000-4000-8000-000000000204')$$, '{}', '42501'),
    ('claims_rollback of cell 2''s lease named as cell 1''s',
     $$SELECT claims_rollback(1, '20000000-0000-4000-8000-000000000204')$$, '{}', '42501'),
    ('claims_commit for unregistered cell 99',
     $$SELECT claims_commit(99, '20000000-0000-4000-8000-000000000103')$$, '{}', '42501'),
    ('claims_rollback for unregistered cell 99',
     $$SELECT claims_rollback(99, '20000000-0000-4000-8000-000000000103')$$, '{}', '42501'),
    ('claims_commit(jsonb) of cell 1''s lease',
     $$SELECT claims_commit('{"cell_id": 1, "lease_uuid": {"value": "20000000-0000-4000-8000-000000000101"}}'::jsonb)$$,
     '{cell1,admin,member}', '42501'),
    ('claims_rollback(jsonb) of cell 1''s lease',
     $$SELECT claims_rollback('{"cellId": 1, "leaseUuid": "20000000-0000-4000-8000-000000000102"}'::jsonb)$$,
     '{cell1,admin,member}', '42501'),
    ('claims_commit(jsonb) of cell 2''s lease',
     $$SELECT claims_commit('{"cell_id": 2, "lease_uuid": {"value": "20000000-0000-4000-8000-000000000201"}}'::jsonb)$$,
     '{cell2,admin}', '42501'),
    ('claims_rollback(jsonb) of cell 2''s lease named as cell 1''s',
     $$SELECT claims_rollback('{"cell_id": 1, "lease_uuid": {"value": "20000000-0000-4000-8000-000000000204"}}'::jsonb)$$,
     '{}', '42501'),
    ('claims_get_cells',
     $$SELECT claims_get_cells()$$, '{cell1,cell2,admin,member}', '42501'),
    ('claims_get_record of cell 2''s value',
     $$SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "sec20-c2-active"}}')$$,
     '{cell1,cell2,router,admin,member}', '42501'),
    ('claims_get_record of an unclaimed value',
     $$SELECT claims_get_record('{"claim": {"username": "sec20-nobody-has-this"}}')$$,
     '{cell1,cell2,router,admin,member}', '42501'),
    ('claims_list_leases for cell 1',
     $$SELECT claims_list_leases('{"cell_id": 1}')$$, '{cell1,admin,member}', '42501'),
    ('claims_list_leases for cell 2',
     $$SELECT claims_list_leases('{"cell_id": 2}')$$, '{cell2,admin}', '42501'),
    ('claims_list_leases for unregistered cell 99',
     $$SELECT claims_list_leases('{"cell_id": 99}')$$, '{}', '42501'),
    ('claims_list_records for cell 1',
     $$SELECT claims_list_records('{"cell_id": 1, "source_type": "RAILS_TABLE_USERS"}')$$, '{cell1,admin,member}', '42501'),
    ('claims_list_records for cell 2',
     $$SELECT claims_list_records('{"cell_id": 2, "source_type": "RAILS_TABLE_USERS"}')$$, '{cell2,admin}', '42501'),
    ('claims_list_records for unregistered cell 99',
     $$SELECT claims_list_records('{"cell_id": 99, "source_type": "RAILS_TABLE_USERS"}')$$, '{}', '42501'),
    -- administrator functions
    ('claims_register_cell',
     $$SELECT claims_register_cell(3, 'sec20-three', 'sec20_cell3', 'matrix')$$, '{admin}', '42501'),
    ('claims_rename_cell',
     $$SELECT claims_rename_cell(2, 'sec20-two-renamed', 'matrix')$$, '{admin}', '42501'),
    ('claims_set_cell_disabled (enable)',
     $$SELECT claims_set_cell_disabled(2, false, 'matrix')$$, '{admin}', '42501'),
    ('claims_set_cell_disabled (disable)',
     $$SELECT claims_set_cell_disabled(3, true, 'matrix')$$, '{admin}', '42501'),
    ('claims_admin_finish_lease',
     $$SELECT claims_admin_finish_lease('20000000-0000-4000-8000-000000000203', 'rollback', 'matrix')$$, '{admin}', '42501'),
    ('claims_decommission_cell',
     $$SELECT claims_decommission_cell(3, 'matrix', true)$$, '{admin}', '42501'),
    ('claims_set_cell_info',
     $$SELECT claims_set_cell_info(1, 'sec20.example:443', 'sec20', '{"[1,10]"}', 'matrix')$$, '{admin}', '42501'),
    ('SELECT from claims_outstanding_leases',
     $$SELECT * FROM claims_outstanding_leases$$, '{admin}', '42501'),
    ('claims_require_admin()',
     $$SELECT claims_require_admin()$$, '{admin}', '42501'),
    ('claims_audit() (internal)',
     $$SELECT claims_audit('forged', 1, NULL, 'forged', '{}')$$, '{}', '42501'),
    -- tables: claims
    ('SELECT from claims', $$SELECT * FROM claims$$, '{admin}', '42501'),
    ('INSERT into claims',
     $$INSERT INTO claims (uuid, bucket_type, bucket_value, bucket_digest, subject_type, subject_id,
                           source_type, source_id, creator_id, status)
       VALUES (gen_random_uuid(), 4, 'sec20-direct', sha256('sec20-direct'), 4, 1, 1, '\x01', 1, 'ACTIVE')$$,
     '{}', '42501'),
    ('UPDATE claims', $$UPDATE claims SET creator_id = 1$$, '{}', '42501'),
    ('DELETE from claims', $$DELETE FROM claims$$, '{}', '42501'),
    ('TRUNCATE claims', $$TRUNCATE claims CASCADE$$, '{}', '42501'),
    -- tables: claim_leases
    ('SELECT from claim_leases', $$SELECT * FROM claim_leases$$, '{admin}', '42501'),
    ('INSERT into claim_leases',
     $$INSERT INTO claim_leases (uuid, creator_id, payload, claim_types, claim_digests)
       VALUES (gen_random_uuid(), 1, '{}', '{}', '{}')$$, '{}', '42501'),
    ('UPDATE claim_leases', $$UPDATE claim_leases SET creator_id = 1$$, '{}', '42501'),
    ('DELETE from claim_leases', $$DELETE FROM claim_leases$$, '{}', '42501'),
    ('TRUNCATE claim_leases', $$TRUNCATE claim_leases$$, '{}', '42501'),
    -- tables: the cell registry and the audit log
    ('SELECT from claim_cells', $$SELECT * FROM claim_cells$$, '{admin}', '42501'),
    ('INSERT into claim_cells (self-registration)',
     $$INSERT INTO claim_cells (cell_id, name, role_name) VALUES (42, 'sec20-{role}', '{role}')$$, '{}', '42501'),
    ('UPDATE claim_cells (rebinding cell 2)',
     $$UPDATE claim_cells SET role_name = '{role}', disabled = false$$, '{}', '42501'),
    ('DELETE from claim_cells', $$DELETE FROM claim_cells$$, '{}', '42501'),
    ('SELECT from claim_admin_actions', $$SELECT * FROM claim_admin_actions$$, '{admin}', '42501'),
    ('INSERT into claim_admin_actions',
     $$INSERT INTO claim_admin_actions (actor, session_role, action) VALUES ('someone', 'someone', 'forged')$$,
     '{}', '42501'),
    ('UPDATE claim_admin_actions', $$UPDATE claim_admin_actions SET actor = 'someone'$$, '{}', '42501'),
    ('DELETE from claim_admin_actions', $$DELETE FROM claim_admin_actions$$, '{}', '42501'),
    ('nextval of the audit sequence', $$SELECT nextval('claim_admin_actions_action_id_seq')$$, '{}', '42501'),
    -- registries: readable by everyone, writable by nobody
    ('SELECT from claim_bucket_types', $$SELECT * FROM claim_bucket_types$$,
     '{cell1,cell2,router,admin,nobody,member,noinherit}', '42501'),
    ('INSERT into claim_bucket_types',
     $$INSERT INTO claim_bucket_types (type_id, name) VALUES (99, 'SEC20')$$, '{}', '42501'),
    ('UPDATE claim_bucket_types', $$UPDATE claim_bucket_types SET integer_valued = NOT integer_valued$$, '{}', '42501'),
    ('DELETE from claim_bucket_types', $$DELETE FROM claim_bucket_types$$, '{}', '42501'),
    -- settings and roles
    ('SET claims.open_mode = on', $$SET claims.open_mode = on$$, '{}', '55P02'),
    ('GRANT claims_admin to oneself', $$GRANT claims_admin TO {role}$$, '{}', '42501');

-- Run the matrix: for each operation and role, as superuser note the state,
-- SET ROLE, try, RESET ROLE, and for a refusal check that nothing changed.
CREATE FUNCTION sec20_run() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    m record;
    r text;
    stmt text;
    what text;
    before text;
BEGIN
    FOR m IN SELECT * FROM sec20_matrix ORDER BY n LOOP
        FOREACH r IN ARRAY ARRAY['cell1', 'cell2', 'router', 'admin', 'nobody', 'member', 'noinherit'] LOOP
            stmt := replace(m.stmt, '{role}', 'sec20_' || r);
            before := sec20_state();
            EXECUTE format('SET ROLE %I', 'sec20_' || r);
            IF r = ANY (m.allowed) THEN
                what := format('%s as sec20_%s: allowed', m.op, r);
                RETURN NEXT lives_ok(stmt, what);
            ELSE
                what := format('%s as sec20_%s: refused with %s', m.op, r, m.refused);
                RETURN NEXT throws_ok(stmt, m.refused, NULL, what);
            END IF;
            RESET ROLE;
            IF NOT r = ANY (m.allowed) THEN
                RETURN NEXT is(sec20_state(), before,
                    format('%s as sec20_%s: the refused attempt changed nothing', m.op, r));
            END IF;
        END LOOP;
    END LOOP;
END
$$;
SELECT * FROM sec20_run();

-- What the allowed calls did (as superuser).
SELECT results_eq(
    $$SELECT uuid::text, state::text, finished_by FROM claim_leases
       WHERE uuid::text LIKE '20000000-%' ORDER BY uuid$$,
    $$VALUES ('20000000-0000-4000-8000-000000000100', 'committed', NULL::text),
             ('20000000-0000-4000-8000-000000000101', 'committed', NULL),
             ('20000000-0000-4000-8000-000000000102', 'rolled_back', NULL),
             ('20000000-0000-4000-8000-000000000103', 'outstanding', NULL),
             ('20000000-0000-4000-8000-000000000200', 'committed', NULL),
             ('20000000-0000-4000-8000-000000000201', 'committed', NULL),
             ('20000000-0000-4000-8000-000000000202', 'rolled_back', NULL),
             ('20000000-0000-4000-8000-000000000203', 'rolled_back', 'sec20_admin'),
             ('20000000-0000-4000-8000-000000000204', 'outstanding', NULL)$$,
    'leases: commits, rollbacks and the force-finish by sec20_admin took effect, nothing else');
SELECT results_eq(
    $$SELECT creator_id, bucket_value COLLATE "default" FROM claims WHERE bucket_value LIKE 'sec20-new-%' ORDER BY 2$$,
    $$VALUES (1::bigint, 'sec20-new-1-sec20_admin'), (1, 'sec20-new-1-sec20_cell1'), (1, 'sec20-new-1-sec20_member'),
             (2, 'sec20-new-2-sec20_admin'), (2, 'sec20-new-2-sec20_cell2')$$,
    'new values were leased only by the roles allowed to act for their cells');
SELECT results_eq(
    $$SELECT cell_id, name, role_name, disabled FROM claim_cells ORDER BY cell_id$$,
    $$VALUES (1::bigint, 'sec20-one', 'sec20_cell1', false), (2, 'sec20-two-renamed', 'sec20_cell2', false),
             (3, 'sec20-three', 'sec20_cell3', true)$$,
    'the cell registry changed only by the administrator''s calls');
SELECT results_eq(
    $$SELECT action, cell_id FROM claim_admin_actions WHERE actor = 'sec20_admin' ORDER BY action_id$$,
    $$VALUES ('register_cell', 3::bigint), ('rename_cell', 2), ('enable_cell', 2), ('disable_cell', 3),
             ('finish_lease_rollback', 2), ('decommission_cell', 3), ('set_cell_info', 1)$$,
    'every administrator action of sec20_admin is in the audit log, attributed to it');

-- What the allowed reads return, role by role.
SET ROLE sec20_cell1;
SELECT is(claims_get_record('{"bucket": {"type": "USERNAMES", "value": "sec20-c2-active"}}') #>> '{record,cell_id}',
    '2', 'cell 1 may look up cell 2''s value: the routing answer names cell 2');
SELECT is(claims_get_record('{"claim": {"username": "sec20-nobody-has-this"}}'), NULL,
    'an unclaimed value reads as NULL');
SELECT is(
    (SELECT count(*) FROM jsonb_array_elements(claims_list_records(
        '{"cell_id": 1, "source_type": "RAILS_TABLE_USERS"}')->'records') r WHERE r->>'cell_id' <> '1'),
    0::bigint, 'claims_list_records for cell 1 returns only cell 1''s records');
SELECT ok(
    (SELECT count(*) FROM jsonb_array_elements(claims_list_records(
        '{"cell_id": 1, "source_type": "RAILS_TABLE_USERS"}')->'records') r) > 0,
    'claims_list_records for cell 1 returns cell 1''s records');
RESET ROLE;
SELECT is(
    (SELECT array_agg(l->>'uuid' ORDER BY l->>'uuid')
       FROM jsonb_array_elements(claims_list_leases('{"cell_id": 1}')->'leases') l),
    (SELECT array_agg(uuid::text ORDER BY uuid::text) FROM claim_leases
      WHERE creator_id = 1 AND state = 'outstanding'),
    'claims_list_leases for cell 1 lists exactly cell 1''s outstanding leases');
SET ROLE sec20_router;
SELECT is(claims_get_record('{"bucket": {"type": "USERNAMES", "value": "sec20-c1-active"}}') #>> '{record,cell_id}',
    '1', 'the routing role looks up a value of cell 1');
RESET ROLE;

-- Binding follows role privileges, judged after SET ROLE.
SET ROLE sec20_noinherit;
SELECT throws_ok($$SELECT claims_list_leases('{"cell_id": 1}')$$, '42501', NULL,
    'a NOINHERIT member of cell 1''s role is refused before SET ROLE');
SET ROLE sec20_cell1;
SELECT lives_ok($$SELECT claims_list_leases('{"cell_id": 1}')$$,
    'after SET ROLE to cell 1''s role the same session may act for cell 1');
RESET ROLE;
GRANT sec20_cell1 TO sec20_nobody;
SET ROLE sec20_nobody;
SELECT lives_ok($$SELECT claims_list_records('{"cell_id": 1, "source_type": 1}')$$,
    'a role granted cell 1''s role may act for cell 1');
SELECT throws_ok($$SELECT claims_list_records('{"cell_id": 2, "source_type": 1}')$$, '42501', NULL,
    '... and still not for cell 2');
RESET ROLE;
REVOKE sec20_cell1 FROM sec20_nobody;
SET ROLE sec20_nobody;
SELECT throws_ok($$SELECT claims_list_records('{"cell_id": 1, "source_type": 1}')$$, '42501', NULL,
    'once the grant is revoked it is refused again');
RESET ROLE;
-- claims_cell membership alone is no cell's identity.
GRANT claims_cell TO sec20_nobody;
SET ROLE sec20_nobody;
SELECT throws_ok($$SELECT claims_list_leases('{"cell_id": 1}')$$, '42501', NULL,
    'a member of claims_cell that is no registered cell''s role is refused for cell 1');
SELECT lives_ok($$SELECT claims_get_record('{"claim": {"username": "sec20-c1-active"}}')$$,
    '... but may look values up');
RESET ROLE;

-- Superusers are administrators; unregistered cells are refused even to them.
SELECT lives_ok($$SELECT claims_list_leases('{"cell_id": 2}')$$, 'a superuser may act for cell 2');
SELECT throws_ok($$SELECT claims_list_leases('{"cell_id": 99}')$$, '42501', NULL,
    'a superuser is refused for unregistered cell 99');
SELECT throws_ok($$SET claims.open_mode = on$$, '55P02', NULL,
    'claims.open_mode cannot be changed in a session, not even by a superuser');
SELECT is(current_setting('claims.open_mode'), 'off', 'claims.open_mode is off by default');
SELECT is((SELECT context FROM pg_settings WHERE name = 'claims.open_mode'), 'sighup',
    'claims.open_mode is set in the server configuration (sighup)');

SELECT * FROM finish();
ROLLBACK;
