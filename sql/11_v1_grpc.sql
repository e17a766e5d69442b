--
-- What a claims.v1 gRPC front needs: claims.json_output, UUIDs as
-- types.v1.UUID on input, claims_commit / claims_rollback taking proto3
-- JSON.
--
\set SHOW_CONTEXT never

-- The setting: an enum any session may change, compat by default.
SHOW claims.json_output;
SELECT name, setting, enumvals, context, boot_val FROM pg_settings WHERE name = 'claims.json_output';
SET claims.json_output = proto3;
SHOW claims.json_output;
SET claims.json_output = json;
RESET claims.json_output;

-- Roles of this file: two cells, a router, a role without grants.
CREATE ROLE regress_grpc_a NOLOGIN;
CREATE ROLE regress_grpc_b NOLOGIN;
CREATE ROLE regress_grpc_router NOLOGIN IN ROLE claims_router;
CREATE ROLE regress_grpc_nobody NOLOGIN;
SET client_min_messages = warning;
SELECT claims_register_cell(1301, 'grpc-a', 'regress_grpc_a');
SELECT claims_register_cell(1302, 'grpc-b', 'regress_grpc_b');
RESET client_min_messages;

--
-- UUIDs on input: a bare string or {"value": "..."}.
--
SELECT claims_begin_update(req(1301, jsonb_build_array(rec('USERNAMES', 'grpc-u1')))
                           || '{"lease_uuid": {"value": "018f0000-0000-7000-8000-000000130101"}}') AS answer;
-- the same request again is a retry: the same answer, nothing written
SELECT claims_begin_update(req(1301, jsonb_build_array(rec('USERNAMES', 'grpc-u1')))
                           || '{"lease_uuid": {"value": "018f0000-0000-7000-8000-000000130101"}}') AS retried;
SELECT count(*) AS leases FROM claim_leases WHERE uuid = '018f0000-0000-7000-8000-000000130101';
SELECT claims_begin_update(req(1301, jsonb_build_array(rec('USERNAMES', 'grpc-u2')))
                           || '{"leaseUuid": "018f0000-0000-7000-8000-000000130102"}') AS bare_camel;
-- malformed ones name their JSON path
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(1301, jsonb_build_array(rec('USERNAMES', 'grpc-bad')))
                           || '{"lease_uuid": {"value": "018f0000-0000-7000-8000-00000013010"}}'));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(1301, jsonb_build_array(rec('USERNAMES', 'grpc-bad')))
                           || '{"lease_uuid": {"value": 5}}'));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(1301, jsonb_build_array(rec('USERNAMES', 'grpc-bad')))
                           || '{"lease_uuid": {"uuid": "018f0000-0000-7000-8000-000000130103"}}'));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(1301, jsonb_build_array(rec('USERNAMES', 'grpc-bad')))
                           || '{"lease_uuid": {}}'));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(1301, jsonb_build_array(rec('USERNAMES', 'grpc-bad')))
                           || '{"lease_uuid": {"value": null}}'));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(1301, jsonb_build_array(rec('USERNAMES', 'grpc-bad')))
                           || '{"lease_uuid": ["018f0000-0000-7000-8000-000000130103"]}'));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(1301, jsonb_build_array(rec('USERNAMES', 'grpc-bad')))
                           || '{"lease_uuid": {"value": "018f0000-0000-7000-8000-000000130103", "Value": "x"}}'));

--
-- claims_commit(jsonb) and claims_rollback(jsonb): CommitUpdateRequest and
-- RollbackUpdateRequest, answered by {}.
--
SELECT claims_commit('{"cell_id": 1301, "lease_uuid": {"value": "018f0000-0000-7000-8000-000000130101"}}') AS committed;
SELECT status('USERNAMES', 'grpc-u1');
-- again: succeeds, changes nothing
SELECT claims_commit('{"cellId": "1301", "leaseUuid": "018f0000-0000-7000-8000-000000130101"}') AS committed_again;
SELECT claims_rollback('{"cellId": 1301, "leaseUuid": {"value": "018f0000-0000-7000-8000-000000130102"}}') AS rolled_back;
SELECT status('USERNAMES', 'grpc-u2');
SELECT claims_rollback('{"cell_id": 1301, "lease_uuid": "018f0000-0000-7000-8000-000000130102"}') AS rolled_back_again;
-- the (bigint, uuid) forms agree: same lease, same outcome
SELECT claims_commit(1301, '018f0000-0000-7000-8000-000000130101');
-- the errors of the (bigint, uuid) forms
SELECT expect_error($$SELECT claims_commit('{"cell_id": 1301, "lease_uuid": "018f0000-0000-7000-8000-000000130102"}'::jsonb)$$);
SELECT expect_error($$SELECT claims_rollback('{"cell_id": 1301, "lease_uuid": {"value": "018f0000-0000-7000-8000-000000130101"}}'::jsonb)$$);
SELECT expect_error($$SELECT claims_commit('{"cell_id": 1301, "lease_uuid": "018f0000-0000-7000-8000-0000001301ff"}'::jsonb)$$);
SELECT expect_error($$SELECT claims_commit('{"cell_id": 1302, "lease_uuid": "018f0000-0000-7000-8000-000000130101"}'::jsonb)$$);
SELECT expect_error($$SELECT claims_commit('{"cell_id": 1399, "lease_uuid": "018f0000-0000-7000-8000-000000130101"}'::jsonb)$$);
SELECT expect_error($$SELECT claims_commit('{"cell_id": 0, "lease_uuid": "018f0000-0000-7000-8000-000000130101"}'::jsonb)$$);
SELECT expect_error($$SELECT claims_commit('{"lease_uuid": "018f0000-0000-7000-8000-000000130101"}'::jsonb)$$);
SELECT expect_error($$SELECT claims_commit('{"cell_id": 1301}'::jsonb)$$);
SELECT expect_error($$SELECT claims_rollback('{"cell_id": 1301, "lease_uuid": null}'::jsonb)$$);
SELECT expect_error($$SELECT claims_commit('{"cell_id": 1301, "lease_uuid": "018f0000-0000-7000-8000-000000130101", "force": true}'::jsonb)$$);
SELECT expect_error($$SELECT claims_rollback('{"cell_id": 1301, "lease_uuid": {"value": "not-a-uuid"}}'::jsonb)$$);
SELECT expect_error($$SELECT claims_commit('[1301]'::jsonb)$$);
SELECT expect_error($$SELECT claims_commit(NULL::jsonb)$$);
SELECT expect_error($$SELECT claims_rollback(NULL::jsonb)$$);

-- The cell check, as for the (bigint, uuid) forms: cell 1302's role may
-- not finish cell 1301's lease, not even under its own cell id; cell
-- 1301's role may; a router or a role without grants may not call them.
SELECT claims_begin_update(req(1301, jsonb_build_array(rec('USERNAMES', 'grpc-u3')))) ->> 'lease_uuid' AS l3 \gset
SET ROLE regress_grpc_b;
SELECT expect_error(format('SELECT claims_commit(%L::jsonb)', jsonb_build_object('cell_id', 1301, 'lease_uuid', :'l3')), :'l3', 'l3');
SELECT expect_error(format('SELECT claims_rollback(%L::jsonb)', jsonb_build_object('cell_id', 1302, 'lease_uuid', jsonb_build_object('value', :'l3'))), :'l3', 'l3');
RESET ROLE;
SET ROLE regress_grpc_router;
SELECT expect_error(format('SELECT claims_commit(%L::jsonb)', jsonb_build_object('cell_id', 1301, 'lease_uuid', :'l3')), :'l3', 'l3');
RESET ROLE;
SET ROLE regress_grpc_nobody;
SELECT expect_error(format('SELECT claims_rollback(%L::jsonb)', jsonb_build_object('cell_id', 1301, 'lease_uuid', :'l3')), :'l3', 'l3');
RESET ROLE;
SET ROLE regress_grpc_a;
SELECT claims_commit(jsonb_build_object('cell_id', 1301, 'lease_uuid', jsonb_build_object('value', :'l3'))) AS own_cell_commits;
RESET ROLE;
SELECT status('USERNAMES', 'grpc-u3');
-- a disabled cell's role is refused, an administrator is not
SELECT claims_begin_update(req(1302, jsonb_build_array(rec('USERNAMES', 'grpc-u4')))) ->> 'lease_uuid' AS l4 \gset
SELECT claims_set_cell_disabled(1302, true, 'regress');
SET ROLE regress_grpc_b;
SELECT expect_error(format('SELECT claims_rollback(%L::jsonb)', jsonb_build_object('cell_id', 1302, 'lease_uuid', :'l4')), :'l4', 'l4');
RESET ROLE;
SELECT claims_rollback(jsonb_build_object('cell_id', 1302, 'lease_uuid', :'l4')) AS admin_rolls_back;
SELECT claims_set_cell_disabled(1302, false, 'regress');
