-- Administrator functions: registering, renaming, disabling and enabling
-- cells and the effect on calls; the view of outstanding leases;
-- force-finishing a lease; decommissioning a cell; and the audit log entry
-- of every action (the actor is the administrator's role, never the
-- extension owner).
BEGIN;
SELECT plan(103);

CREATE ROLE sec22_admin LOGIN;
CREATE ROLE sec22_admins NOLOGIN IN ROLE claims_admin;   -- a group of administrators
GRANT sec22_admins TO sec22_admin;                       -- admin through a nested group
CREATE ROLE sec22_cell1 LOGIN IN ROLE claims_cell;   -- already a claims_cell member, not yet a cell
CREATE ROLE sec22_cell2 LOGIN;
CREATE ROLE sec22_cell3 LOGIN;
CREATE ROLE sec22_nobody LOGIN;

CREATE FUNCTION sec22_req(cell bigint, lease text, VARIADIC usernames text[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('cell_id', cell, 'lease_uuid', lease, 'create_records',
        (SELECT jsonb_agg(jsonb_build_object(
            'claim', jsonb_build_object('username', u),
            'subject', jsonb_build_object('type', 'USER', 'id', 5),
            'source', jsonb_build_object('type', 'RAILS_TABLE_USERS', 'rails_primary_key_id', 5),
            'user_data', jsonb_build_object('note', u)) ORDER BY u)
           FROM unnest(usernames) u))
$$;
CREATE FUNCTION sec22_owner() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT r.rolname::text FROM pg_extension e JOIN pg_roles r ON r.oid = e.extowner WHERE e.extname = 'claims'
$$;
CREATE FUNCTION sec22_last_action() RETURNS claim_admin_actions LANGUAGE sql STABLE AS $$
    SELECT * FROM claim_admin_actions ORDER BY action_id DESC LIMIT 1
$$;

SELECT ok(sec22_owner() <> 'sec22_admin', 'the extension owner is not the administrator role of this test');

-- Secure by default: no cell is registered, every call is refused.
SET ROLE sec22_cell1;
SELECT throws_ok($$SELECT claims_begin_update(sec22_req(1, NULL, 'sec22-a'))$$, '42501',
    'cell 1 is not registered', 'unregistered cell 1: its would-be role is refused');
RESET ROLE;
SET ROLE sec22_admin;
SELECT throws_ok($$SELECT claims_list_leases('{"cell_id": 1}')$$, '42501',
    'cell 1 is not registered', 'unregistered cell 1: an administrator is refused too');

-- Register -------------------------------------------------------------------
SELECT lives_ok($$SELECT claims_register_cell(1, 'sec22-one', 'sec22_cell1', 'first cell')$$,
    'administrator registers cell 1');
RESET ROLE;
SELECT is((SELECT (a.actor, a.session_role, a.action, a.cell_id, a.lease_uuid, a.reason, a.detail)::text
             FROM sec22_last_action() a),
    ROW('sec22_admin', session_user::text, 'register_cell', 1::bigint, NULL::uuid, 'first cell',
        '{"name": "sec22-one", "role": "sec22_cell1"}'::jsonb)::text,
    'audit: register_cell by sec22_admin (session role recorded), reason and detail');
SELECT ok((SELECT at FROM sec22_last_action()) <= clock_timestamp(), 'audit: the time is recorded');
SELECT ok(pg_has_role('sec22_cell1', 'claims_cell', 'MEMBER'), 'the cell''s role became a member of claims_cell');
SELECT results_eq($$SELECT cell_id, name, role_name, disabled FROM claim_cells$$,
    $$VALUES (1::bigint, 'sec22-one', 'sec22_cell1', false)$$, 'claim_cells holds cell 1');
SET ROLE sec22_admin;
SELECT lives_ok($$SELECT claims_register_cell(2, 'sec22-two', 'sec22_cell2')$$, 'register cell 2 without a reason');
SELECT is((SELECT reason FROM claim_admin_actions ORDER BY action_id DESC LIMIT 1), NULL, 'audit: no reason given');
SELECT throws_ok($$SELECT claims_register_cell(1, 'sec22-again', 'sec22_cell3')$$, '23505', NULL,
    'a cell id is registered once');
SELECT throws_ok($$SELECT claims_register_cell(3, 'sec22-one', 'sec22_cell3')$$, '23505', NULL,
    'a cell name is registered once');
SELECT throws_ok($$SELECT claims_register_cell(3, 'sec22-three', 'sec22_no_such_role')$$, '42704', NULL,
    'registering an unknown role: 42704');
SELECT throws_ok($$SELECT claims_register_cell(0, 'sec22-zero', 'sec22_cell3')$$, '22023', NULL,
    'cell id 0: 22023');
SELECT throws_ok($$SELECT claims_register_cell(NULL, 'sec22-null', 'sec22_cell3')$$, '22004', NULL,
    'NULL cell id: 22004');
SELECT throws_ok($$SELECT claims_register_cell(3, '', 'sec22_cell3')$$, '23514', NULL,
    'empty cell name: 23514');
SELECT is((SELECT count(*) FROM claim_admin_actions), 2::bigint, 'refused registrations left no audit row');
RESET ROLE;
SET ROLE sec22_cell1;
SELECT throws_ok($$SELECT claims_register_cell(3, 'sec22-three', 'sec22_cell1')$$, '42501', NULL,
    'a cell cannot register cells');
RESET ROLE;

-- Registered cells work, each for itself only.
SET ROLE sec22_cell1;
SELECT is(claims_begin_update(sec22_req(1, '22000000-0000-4000-8000-000000000101', 'sec22-a', 'sec22-b')),
    '{"cell_id": "1", "lease_uuid": "22000000-0000-4000-8000-000000000101"}', 'cell 1 begins a lease once registered');
SELECT lives_ok($$SELECT claims_commit(1, '22000000-0000-4000-8000-000000000101')$$, 'cell 1 commits');
SELECT lives_ok($$SELECT claims_begin_update(sec22_req(1, '22000000-0000-4000-8000-000000000102', 'sec22-c'))$$,
    'cell 1 begins lease 102 (left outstanding)');
SELECT throws_ok($$SELECT claims_begin_update(sec22_req(2, NULL, 'sec22-x'))$$, '42501', NULL, 'cell 1 is refused for cell 2');
RESET ROLE;
SET ROLE sec22_cell2;
SELECT lives_ok($$SELECT claims_begin_update(sec22_req(2, '22000000-0000-4000-8000-000000000201', 'sec22-d', 'sec22-e'))$$,
    'cell 2 begins lease 201');
SELECT lives_ok($$SELECT claims_commit(2, '22000000-0000-4000-8000-000000000201')$$, 'cell 2 commits lease 201');
SELECT lives_ok($$SELECT claims_begin_update(sec22_req(2, '22000000-0000-4000-8000-000000000202', 'sec22-f'))$$,
    'cell 2 begins lease 202 (outstanding)');
SELECT lives_ok($$SELECT claims_begin_update(sec22_req(2, '22000000-0000-4000-8000-000000000203', 'sec22-g'))$$,
    'cell 2 begins lease 203 (outstanding)');
SELECT lives_ok($$SELECT claims_begin_update(sec22_req(2, '22000000-0000-4000-8000-000000000204', 'sec22-h', 'sec22-i'))$$,
    'cell 2 begins lease 204 (outstanding)');
RESET ROLE;

-- Rename -----------------------------------------------------------------------
SET ROLE sec22_admin;
SELECT lives_ok($$SELECT claims_rename_cell(1, 'sec22-uno', 'naming scheme')$$, 'rename cell 1');
SELECT is((SELECT name FROM claim_cells WHERE cell_id = 1), 'sec22-uno', 'the new name is stored');
SELECT is((SELECT (a.actor, a.action, a.cell_id, a.reason, a.detail)::text FROM sec22_last_action() a),
    ROW('sec22_admin', 'rename_cell', 1::bigint, 'naming scheme', '{"old_name": "sec22-one", "new_name": "sec22-uno"}'::jsonb)::text,
    'audit: rename_cell with old and new name');
SELECT throws_ok($$SELECT claims_rename_cell(9, 'sec22-nine')$$, 'P0002', NULL, 'renaming an unknown cell: P0002');
SELECT throws_ok($$SELECT claims_rename_cell(1, 'sec22-two')$$, '23505', NULL, 'renaming to a taken name: 23505');
SELECT throws_ok($$SELECT claims_rename_cell(1, NULL)$$, '22004', NULL, 'renaming to NULL: 22004');
RESET ROLE;
SET ROLE sec22_cell1;
SELECT lives_ok($$SELECT claims_list_leases('{"cell_id": 1}')$$, 'a renamed cell keeps working');
SELECT throws_ok($$SELECT claims_rename_cell(1, 'sec22-mine')$$, '42501', NULL, 'a cell cannot rename itself');
RESET ROLE;

-- Disable and enable ------------------------------------------------------------
SET ROLE sec22_admin;
SELECT lives_ok($$SELECT claims_set_cell_disabled(1, true, 'incident 7')$$, 'disable cell 1');
SELECT is((SELECT (a.actor, a.action, a.cell_id, a.reason)::text FROM sec22_last_action() a),
    ROW('sec22_admin', 'disable_cell', 1::bigint, 'incident 7')::text, 'audit: disable_cell');
RESET ROLE;
SET ROLE sec22_cell1;
SELECT throws_ok($$SELECT claims_begin_update(sec22_req(1, NULL, 'sec22-z'))$$, '42501', 'cell 1 is disabled',
    'disabled cell 1: begin refused');
SELECT throws_ok($$SELECT claims_commit(1, '22000000-0000-4000-8000-000000000102')$$, '42501', 'cell 1 is disabled',
    'disabled cell 1: commit refused');
SELECT throws_ok($$SELECT claims_rollback(1, '22000000-0000-4000-8000-000000000102')$$, '42501', 'cell 1 is disabled',
    'disabled cell 1: rollback refused');
SELECT throws_ok($$SELECT claims_list_leases('{"cell_id": 1}')$$, '42501', 'cell 1 is disabled',
    'disabled cell 1: list_leases refused');
SELECT throws_ok($$SELECT claims_list_records('{"cell_id": 1, "source_type": 1}')$$, '42501', 'cell 1 is disabled',
    'disabled cell 1: list_records refused');
SELECT is(claims_get_record('{"claim": {"username": "sec22-a"}}') #>> '{record,cell_id}', '1',
    'disabled cell 1: values stay routable (get_record)');
RESET ROLE;
SELECT is((SELECT state::text FROM claim_leases WHERE uuid = '22000000-0000-4000-8000-000000000102'), 'outstanding',
    'the refused commit changed nothing');
SET ROLE sec22_admin;
SELECT lives_ok($$SELECT claims_list_leases('{"cell_id": 1}')$$, 'an administrator may still read a disabled cell''s leases');
SELECT throws_ok($$SELECT claims_set_cell_disabled(9, true)$$, 'P0002', NULL, 'disabling an unknown cell: P0002');
SELECT lives_ok($$SELECT claims_set_cell_disabled(1, false, 'incident 7 closed')$$, 'enable cell 1');
SELECT is((SELECT (a.actor, a.action, a.cell_id, a.reason)::text FROM sec22_last_action() a),
    ROW('sec22_admin', 'enable_cell', 1::bigint, 'incident 7 closed')::text, 'audit: enable_cell');
RESET ROLE;
SET ROLE sec22_cell1;
SELECT lives_ok($$SELECT claims_list_leases('{"cell_id": 1}')$$, 'enabled again: cell 1 works');
RESET ROLE;

-- The view of outstanding leases --------------------------------------------------
SET ROLE sec22_admin;
SELECT results_eq(
    $$SELECT cell_id, lease_uuid::text, records, payload FROM claims_outstanding_leases ORDER BY lease_uuid$$,
    $$VALUES (1::bigint, '22000000-0000-4000-8000-000000000102', 1, sec22_req(1, '22000000-0000-4000-8000-000000000102', 'sec22-c')),
             (2::bigint, '22000000-0000-4000-8000-000000000202', 1, sec22_req(2, '22000000-0000-4000-8000-000000000202', 'sec22-f')),
             (2::bigint, '22000000-0000-4000-8000-000000000203', 1, sec22_req(2, '22000000-0000-4000-8000-000000000203', 'sec22-g')),
             (2::bigint, '22000000-0000-4000-8000-000000000204', 2, sec22_req(2, '22000000-0000-4000-8000-000000000204', 'sec22-h', 'sec22-i'))$$,
    'claims_outstanding_leases: every cell''s outstanding leases with their size and payload');
SELECT is((SELECT count(*) FROM claims_outstanding_leases WHERE age >= interval '0' AND created_at <= now()), 4::bigint,
    'claims_outstanding_leases: each with its age');
RESET ROLE;
SET ROLE sec22_cell1;
SELECT throws_ok($$SELECT * FROM claims_outstanding_leases$$, '42501', NULL, 'a cell cannot read the view');
RESET ROLE;

-- Force-finish a stuck lease ---------------------------------------------------------
SET ROLE sec22_admin;
SELECT is(claims_admin_finish_lease('22000000-0000-4000-8000-000000000202', 'rollback', 'cell 2 crashed'),
    '{"cell_id": "2", "lease_uuid": "22000000-0000-4000-8000-000000000202", "previous_state": "outstanding",
      "state": "rolled_back"}', 'force rollback of cell 2''s lease 202');
SELECT is((SELECT (l.state, l.finished_by, l.finish_reason)::text FROM claim_leases l
            WHERE l.uuid = '22000000-0000-4000-8000-000000000202'),
    ROW('rolled_back', 'sec22_admin', 'cell 2 crashed')::text, 'lease 202: finished_by and finish_reason recorded');
SELECT is(claims_get_record('{"claim": {"username": "sec22-f"}}'), NULL, 'its value is free again');
SELECT is((SELECT (a.actor, a.action, a.cell_id, a.lease_uuid, a.reason, a.detail)::text FROM sec22_last_action() a),
    ROW('sec22_admin', 'finish_lease_rollback', 2::bigint, '22000000-0000-4000-8000-000000000202'::uuid, 'cell 2 crashed',
        '{"previous_state": "outstanding", "state": "rolled_back"}'::jsonb)::text, 'audit: finish_lease_rollback');
SELECT is(claims_admin_finish_lease('22000000-0000-4000-8000-000000000203', 'commit', 'confirmed with cell 2'),
    '{"cell_id": "2", "lease_uuid": "22000000-0000-4000-8000-000000000203", "previous_state": "outstanding",
      "state": "committed"}', 'force commit of cell 2''s lease 203');
SELECT is((SELECT (l.state, l.finished_by, l.finish_reason)::text FROM claim_leases l
            WHERE l.uuid = '22000000-0000-4000-8000-000000000203'),
    ROW('committed', 'sec22_admin', 'confirmed with cell 2')::text, 'lease 203: finished_by and finish_reason recorded');
SELECT is(claims_get_record('{"claim": {"username": "sec22-g"}}') #>> '{record,status}', 'ACTIVE', 'its value is ACTIVE');
SELECT is((SELECT (a.actor, a.action, a.lease_uuid, a.detail)::text FROM sec22_last_action() a),
    ROW('sec22_admin', 'finish_lease_commit', '22000000-0000-4000-8000-000000000203'::uuid,
        '{"previous_state": "outstanding", "state": "committed"}'::jsonb)::text, 'audit: finish_lease_commit');
SELECT is(claims_admin_finish_lease('22000000-0000-4000-8000-000000000203', 'commit', 'again'),
    '{"cell_id": "2", "lease_uuid": "22000000-0000-4000-8000-000000000203", "previous_state": "committed",
      "state": "committed"}', 'force commit of a committed lease: succeeds, changes nothing');
SELECT is((SELECT finish_reason FROM claim_leases WHERE uuid = '22000000-0000-4000-8000-000000000203'),
    'confirmed with cell 2', '... the first reason stays on the lease');
SELECT is((SELECT (a.action, a.reason)::text FROM sec22_last_action() a), ROW('finish_lease_commit', 'again')::text,
    '... and the attempt is audited');
SELECT throws_ok($$SELECT claims_admin_finish_lease('22000000-0000-4000-8000-000000000203', 'rollback', 'undo')$$,
    '55000', NULL, 'force rollback of a committed lease: 55000');
SELECT throws_ok($$SELECT claims_admin_finish_lease('22000000-0000-4000-8000-000000000204', 'delete', 'x')$$,
    '22023', NULL, 'unknown action: 22023');
SELECT throws_ok($$SELECT claims_admin_finish_lease('22000000-0000-4000-8000-000000000204', 'rollback', '  ')$$,
    '22023', NULL, 'blank reason: 22023');
SELECT throws_ok($$SELECT claims_admin_finish_lease('22000000-0000-4000-8000-000000000204', 'rollback', NULL)$$,
    '22004', NULL, 'NULL reason: 22004');
SELECT throws_ok($$SELECT claims_admin_finish_lease('22000000-0000-4000-8000-0000000009ff', 'rollback', 'x')$$,
    'P0002', NULL, 'unknown lease: P0002');
RESET ROLE;
SET ROLE sec22_cell2;
SELECT throws_ok($$SELECT claims_admin_finish_lease('22000000-0000-4000-8000-000000000204', 'rollback', 'mine')$$,
    '42501', NULL, 'a cell cannot force-finish, not even its own lease');
SELECT lives_ok($$SELECT claims_commit(2, '22000000-0000-4000-8000-000000000203')$$,
    'the cell''s late commit of a force-committed lease succeeds');
SELECT throws_ok($$SELECT claims_commit(2, '22000000-0000-4000-8000-000000000202')$$, '55000', NULL,
    'the cell''s late commit of a force-rolled-back lease fails loudly');
RESET ROLE;
SELECT is((SELECT finished_by FROM claim_leases WHERE uuid = '22000000-0000-4000-8000-000000000201'), NULL,
    'a lease the cell finished itself has no finished_by');

-- Decommission -------------------------------------------------------------------------
SET ROLE sec22_admin;
SELECT throws_ok($$SELECT claims_decommission_cell(2, 'cell 2 retired')$$, '55000',
    'cell 2 has 1 outstanding leases', 'decommission refuses while cell 2 has an outstanding lease');
RESET ROLE;
SELECT is((SELECT disabled FROM claim_cells WHERE cell_id = 2), false, '... and leaves the cell enabled');
SELECT is((SELECT count(*) FROM claims WHERE creator_id = 2), 5::bigint, '... and its claims in place');
SET ROLE sec22_admin;
SELECT throws_ok($$SELECT claims_decommission_cell(2, '', true)$$, '22023', NULL, 'decommission needs a reason');
SELECT throws_ok($$SELECT claims_decommission_cell(9, 'x', true)$$, 'P0002', NULL, 'decommissioning an unknown cell: P0002');
SELECT is(claims_decommission_cell(2, 'cell 2 retired', force => true),
    '{"cell_id": "2", "claims_released": 3, "leases_rolled_back": 1, "disabled": true}',
    'forced decommission: rolls back the lease, releases the 3 committed claims, disables the cell');
SELECT is((SELECT (a.actor, a.action, a.cell_id, a.reason, a.detail)::text FROM sec22_last_action() a),
    ROW('sec22_admin', 'decommission_cell', 2::bigint, 'cell 2 retired',
        '{"force": true, "claims_released": 3, "leases_rolled_back": 1}'::jsonb)::text, 'audit: decommission_cell');
RESET ROLE;
SELECT is((SELECT count(*) FROM claims WHERE creator_id = 2), 0::bigint, 'cell 2 holds no claims');
SELECT is((SELECT (state, finished_by, finish_reason)::text FROM claim_leases
            WHERE uuid = '22000000-0000-4000-8000-000000000204'),
    ROW('rolled_back', 'sec22_admin', 'cell 2 retired')::text, 'the rolled back lease names the administrator and the reason');
SELECT is((SELECT disabled FROM claim_cells WHERE cell_id = 2), true, 'cell 2 is disabled');
SET ROLE sec22_cell2;
SELECT throws_ok($$SELECT claims_begin_update(sec22_req(2, NULL, 'sec22-d'))$$, '42501', 'cell 2 is disabled',
    'a decommissioned cell is refused');
RESET ROLE;
SET ROLE sec22_admin;
SELECT lives_ok($$SELECT claims_register_cell(3, 'sec22-three', 'sec22_cell3', 'takes over from cell 2')$$, 'register cell 3');
RESET ROLE;
SET ROLE sec22_cell3;
SELECT is(claims_begin_update(sec22_req(3, '22000000-0000-4000-8000-000000000301', 'sec22-d', 'sec22-e', 'sec22-g', 'sec22-h', 'sec22-i')),
    '{"cell_id": "3", "lease_uuid": "22000000-0000-4000-8000-000000000301"}',
    'the released values are free for another cell');
SELECT lives_ok($$SELECT claims_commit(3, '22000000-0000-4000-8000-000000000301')$$, 'cell 3 commits them');
RESET ROLE;
SET ROLE sec22_cell1;
SELECT is(claims_get_record('{"claim": {"username": "sec22-d"}}') #>> '{record,cell_id}', '3', 'sec22-d now routes to cell 3');
RESET ROLE;
-- Without outstanding leases no force is needed; decommissioning twice is harmless.
SET ROLE sec22_admin;
SELECT lives_ok($$SELECT claims_rollback(1, '22000000-0000-4000-8000-000000000102')$$,
    'an administrator rolls back cell 1''s last lease through the API');
SELECT is(claims_decommission_cell(1, 'cell 1 retired'),
    '{"cell_id": "1", "claims_released": 2, "leases_rolled_back": 0, "disabled": true}',
    'decommission without outstanding leases needs no force');
SELECT is(claims_decommission_cell(1, 'again'),
    '{"cell_id": "1", "claims_released": 0, "leases_rolled_back": 0, "disabled": true}',
    'decommissioning again releases nothing more');
RESET ROLE;
SET ROLE sec22_cell1;
SELECT throws_ok($$SELECT claims_decommission_cell(3, 'x', true)$$, '42501', NULL, 'a cell cannot decommission cells');
RESET ROLE;

-- The audit log -------------------------------------------------------------------------
SET ROLE sec22_admin;
SELECT results_eq(
    $$SELECT actor, session_role, action, cell_id FROM claim_admin_actions ORDER BY action_id$$,
    format($$VALUES ('sec22_admin', %1$L, 'register_cell', 1::bigint), ('sec22_admin', %1$L, 'register_cell', 2),
             ('sec22_admin', %1$L, 'rename_cell', 1), ('sec22_admin', %1$L, 'disable_cell', 1),
             ('sec22_admin', %1$L, 'enable_cell', 1), ('sec22_admin', %1$L, 'finish_lease_rollback', 2),
             ('sec22_admin', %1$L, 'finish_lease_commit', 2), ('sec22_admin', %1$L, 'finish_lease_commit', 2),
             ('sec22_admin', %1$L, 'decommission_cell', 2), ('sec22_admin', %1$L, 'register_cell', 3),
             ('sec22_admin', %1$L, 'decommission_cell', 1), ('sec22_admin', %1$L, 'decommission_cell', 1)$$, session_user),
    'the audit log holds every administrator action, in order, readable by administrators');
SELECT is((SELECT count(*) FROM claim_admin_actions WHERE actor = sec22_owner()), 0::bigint,
    'no audit row names the extension owner');
SELECT ok((SELECT bool_and(at <= clock_timestamp()) AND bool_and(at >= now()) FROM claim_admin_actions),
    'every row carries the time of its transaction');
SELECT throws_ok($$UPDATE claim_admin_actions SET actor = 'someone else'$$, '42501', NULL,
    'administrators cannot rewrite the audit log');
SELECT throws_ok($$DELETE FROM claim_admin_actions$$, '42501', NULL, 'administrators cannot delete from the audit log');
SELECT throws_ok($$SELECT claims_audit('forged', 1, NULL, 'x', '{}')$$, '42501', NULL,
    'administrators cannot write audit rows of their own');
RESET ROLE;
SET ROLE sec22_cell3;
SELECT throws_ok($$SELECT * FROM claim_admin_actions$$, '42501', NULL, 'cells cannot read the audit log');
RESET ROLE;

-- A superuser is an administrator too, and is recorded as itself.
SELECT lives_ok($$SELECT claims_rename_cell(3, 'sec22-drei', 'by superuser')$$, 'a superuser renames cell 3');
SELECT is((SELECT actor FROM sec22_last_action()), current_user::text, 'audit: the superuser is the actor');
-- Administrators act through SET ROLE: the role after SET ROLE is the actor.
GRANT sec22_admin TO sec22_nobody;
SET ROLE sec22_nobody;
SELECT lives_ok($$SELECT claims_set_cell_disabled(3, true, 'via a member')$$,
    'a member of an administrator role may act');
SELECT is((SELECT actor FROM sec22_last_action()), 'sec22_nobody', 'audit: the acting role is recorded');
RESET ROLE;
REVOKE sec22_admin FROM sec22_nobody;
SET ROLE sec22_nobody;
SELECT throws_ok($$SELECT claims_set_cell_disabled(3, false, 'x')$$, '42501', NULL,
    'once the grant is revoked the role is refused');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
