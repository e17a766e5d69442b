--
-- What a claims.v1 gRPC front needs: claims.json_output, UUIDs as
-- types.v1.UUID on input, claims_commit / claims_rollback taking proto3
-- JSON, CellInfo in the cell registry (claims_set_cell_info,
-- claims_get_cells, GetRecordResponse.cell_info).
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

--
-- claims_set_cell_info: address, session prefix, sequence ranges.
--
SELECT claims_set_cell_info(1301, 'grpc-a.example.com:443', 'cell-1301',
                            ARRAY['[1,1000000]', '[5000001,6000000]']::int8range[], 'grpc-a goes live');
SELECT cell_id, address, session_prefix, sequence_ranges FROM claim_cells WHERE cell_id = 1301;
SELECT actor = current_user AS actor_is_me, action, cell_id, reason, detail FROM claim_admin_actions
WHERE action = 'set_cell_info' ORDER BY action_id DESC LIMIT 1;
-- ranges: bounds of any kind are stored canonical; an unbounded end is the int64 limit
SELECT claims_set_cell_info(1302, 'grpc-b.example.com:443', NULL,
                            ARRAY['(1000000,2000001)', '[9000000000000000000,)']::int8range[]);
SELECT cell_id, address, session_prefix, sequence_ranges FROM claim_cells WHERE cell_id = 1302;
-- refused: 22023 for bad input, 23505 for another cell's range, P0002, 22004
SELECT expect_error($$SELECT claims_set_cell_info(1302, 'b', 'b', ARRAY['[3000000,3000000)']::int8range[])$$);
SELECT expect_error($$SELECT claims_set_cell_info(1302, 'b', 'b', ARRAY['[3000000,4000000]', NULL]::int8range[])$$);
SELECT expect_error($$SELECT claims_set_cell_info(1302, 'b', 'b', ARRAY['[3000000,4000000]', '[4000000,4000010]']::int8range[])$$);
SELECT expect_error($$SELECT claims_set_cell_info(1302, 'b', 'b', ARRAY[ARRAY['[3,4]'], ARRAY['[7,8]']]::int8range[])$$);
SELECT expect_error($$SELECT claims_set_cell_info(1302, 'b', 'b', ARRAY['[3000000,4000000]', '[999999,1000000]']::int8range[])$$);
SELECT expect_error($$SELECT claims_set_cell_info(1302, 'b', 'b', ARRAY['(,0]', '[5500000,5500000]']::int8range[])$$);
SELECT expect_error($$SELECT claims_set_cell_info(1302, 'b', 'b', ARRAY['[4000000,3000000]']::int8range[])$$);
SELECT expect_error($$SELECT claims_set_cell_info(1399, 'x', 'x', '{}')$$);
SELECT expect_error($$SELECT claims_set_cell_info(NULL, 'x', 'x', '{}')$$);
SET ROLE regress_grpc_a;
SELECT expect_error($$SELECT claims_set_cell_info(1301, 'evil', 'evil', '{}')$$);
RESET ROLE;
-- nothing of the refused calls was kept or audited
SELECT cell_id, address, session_prefix, sequence_ranges FROM claim_cells WHERE cell_id IN (1301, 1302) ORDER BY cell_id;
SELECT count(*) AS set_cell_info_audits FROM claim_admin_actions WHERE action = 'set_cell_info';

--
-- claims_get_cells: every registered cell as CellInfo, for cells' roles
-- and administrators.
--
SELECT jsonb_array_length(c -> 'cells') AS cells,
       (SELECT count(*) FROM claim_cells) AS registered,
       c #> '{cells,0}' AS first,
       (SELECT jsonb_agg(e) FROM jsonb_array_elements(c -> 'cells') AS e WHERE e ->> 'id' IN ('1301', '1302')) AS grpc
FROM claims_get_cells() AS c;
-- the ids in order, as strings
SELECT bool_and(id > prev) AS ids_in_order, bool_and(is_string) AS ids_are_strings
FROM (SELECT (e ->> 'id')::bigint AS id, lag((e ->> 'id')::bigint) OVER (ORDER BY o) AS prev,
             jsonb_typeof(e -> 'id') = 'string' AS is_string
      FROM claims_get_cells('{}') AS c, jsonb_array_elements(c -> 'cells') WITH ORDINALITY AS x(e, o)) AS s;
-- a disabled cell is listed too
SELECT claims_set_cell_disabled(1302, true, 'regress');
SELECT (SELECT e FROM jsonb_array_elements(c -> 'cells') AS e WHERE e ->> 'id' = '1302') AS disabled_cell
FROM claims_get_cells() AS c;
-- who may call it: the role of an enabled cell; not the role whose only
-- cell is disabled, a router, a role without grants
SET ROLE regress_grpc_a;
SELECT jsonb_array_length(claims_get_cells() -> 'cells') AS cells_seen_by_a_cell;
RESET ROLE;
SET ROLE regress_grpc_b;
SELECT expect_error($$SELECT claims_get_cells()$$);
RESET ROLE;
SELECT claims_set_cell_disabled(1302, false, 'regress');
SET ROLE regress_grpc_b;
SELECT jsonb_array_length(claims_get_cells() -> 'cells') AS cells_seen_once_enabled;
RESET ROLE;
SET ROLE regress_grpc_router;
SELECT expect_error($$SELECT claims_get_cells()$$);
RESET ROLE;
SET ROLE regress_grpc_nobody;
SELECT expect_error($$SELECT claims_get_cells()$$);
RESET ROLE;
-- a member of claims_cell that is no cell's role
CREATE ROLE regress_grpc_stray NOLOGIN IN ROLE claims_cell;
SET ROLE regress_grpc_stray;
SELECT expect_error($$SELECT claims_get_cells()$$);
RESET ROLE;
-- the request is a GetCellsRequest: no fields
SELECT expect_error($$SELECT claims_get_cells('{"cell_id": 1}')$$);
SELECT expect_error($$SELECT claims_get_cells('[]')$$);
SELECT expect_error($$SELECT claims_get_cells(NULL)$$);

--
-- claims_get_record: the owning cell's CellInfo as cell_info.
--
SELECT scrub(claims_get_record('{"bucket": {"type": "USERNAMES", "value": "grpc-u1"}}')) AS get_record;
SELECT claims_get_record('{"claim": {"username": "grpc-u1"}}') -> 'cell_info' AS by_claim;
-- a cell without CellInfo has its id only
SELECT claims_begin_update(req(1200, jsonb_build_array(rec('USERNAMES', 'grpc-u5')))) ->> 'lease_uuid' AS l5 \gset
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "grpc-u5"}}') -> 'cell_info' AS bare_cell;
SET ROLE regress_grpc_router;
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "grpc-u1"}}') #> '{cell_info,address}' AS router_sees_address;
RESET ROLE;
-- a change of CellInfo is seen at the next call
SELECT claims_set_cell_info(1301, 'grpc-a2.example.com:443', NULL, NULL, 'moved');
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "grpc-u1"}}') -> 'cell_info' AS after_move;

--
-- claims.json_output = proto3: the proto3 JSON printer's output.
--
SELECT claims_set_cell_info(1301, 'grpc-a.example.com:443', 'cell-1301',
                            ARRAY['[0,999]', '[5000001,6000000]']::int8range[], 'back');
SET claims.json_output = proto3;
-- BeginUpdateResponse: cellId, leaseUuid as types.v1.UUID
SELECT claims_begin_update(req(1301, jsonb_build_array(rec('USERNAMES', 'grpc-p1'), rec('USER_IDS', '77'))))
       || '{}' AS begin_answer \gset
SELECT jsonb_set(:'begin_answer'::jsonb, '{leaseUuid,value}', '"<uuid>"') AS begin_update,
       :'begin_answer'::jsonb #>> '{leaseUuid,value}' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$' AS uuid_v7;
SELECT (:'begin_answer'::jsonb #>> '{leaseUuid,value}') = (SELECT uuid::text FROM claim_leases ORDER BY created_at DESC, uuid DESC LIMIT 1) AS lease_uuid_value;
-- GetRecordResponse: Record with UUID messages, json names, cellInfo
SELECT jsonb_pretty(jsonb_set(jsonb_set(jsonb_set(jsonb_set(r, '{record,uuid,value}', '"<uuid>"'),
           '{record,leaseUuid,value}', '"<uuid>"'), '{record,createdAt}', '"<utc>"'), '{record,updatedAt}', '"<utc>"')) AS get_record
FROM claims_get_record('{"claim": {"userId": "77"}}') AS r;
SELECT claims_commit(jsonb_build_object('cell_id', 1301, 'lease_uuid', :'begin_answer'::jsonb -> 'leaseUuid')) AS commit_answer;
SELECT r #> '{record}' ? 'leaseUuid' AS leased, r #>> '{record,status}' AS status,
       r #> '{record,uuid}' ?& ARRAY['value'] AS uuid_message
FROM claims_get_record('{"bucket": {"type": "USERNAMES", "value": "grpc-p1"}}') AS r;
-- ListLeasesResponse: leases of LeaseRecord with UUID messages; none: {}
SELECT claims_begin_update(req(1301, jsonb_build_array(rec('USERNAMES', 'grpc-p2')))) #>> '{leaseUuid,value}' AS lp2 \gset
SELECT claims_begin_update(req(1301, jsonb_build_array(rec('USERNAMES', 'grpc-p3')))) #>> '{leaseUuid,value}' AS lp3 \gset
SELECT jsonb_pretty(jsonb_set(jsonb_set(jsonb_set(jsonb_set(a, '{leases,0,uuid,value}', '"<uuid>"'),
           '{leases,0,createdAt}', '"<utc>"'), '{leases,0,updatedAt}', '"<utc>"'), '{next,value}', '"<token>"')) AS list_leases
FROM claims_list_leases('{"cell_id": 1301, "limit": 1}') AS a;
SELECT a #>> '{leases,0,uuid,value}' = :'lp3' AS second_page_is_lp3, a ? 'next' AS has_next
FROM claims_list_leases(jsonb_build_object('cell_id', 1301, 'limit', 1,
         'next', (claims_list_leases('{"cell_id": 1301, "limit": 1}') -> 'next'))) AS a;
SELECT claims_rollback(jsonb_build_object('cellId', 1301, 'leaseUuid', jsonb_build_object('value', :'lp2'))) AS r2,
       claims_rollback(jsonb_build_object('cellId', 1301, 'leaseUuid', jsonb_build_object('value', :'lp3'))) AS r3;
SELECT claims_list_leases('{"cell_id": 1301}') AS no_leases;
-- ListRecordsResponse: truncated and empty records left out when false/empty
SELECT a - 'records' AS without_records, jsonb_array_length(a -> 'records') AS records,
       a #> '{records,0,metadata,source}' AS first_source
FROM claims_list_records('{"cell_id": 801, "source_type": "RAILS_TABLE_USERS", "limit": 1}') AS a;
SELECT a AS no_records FROM claims_list_records('{"cell_id": 1301, "source_type": "RAILS_TABLE_SNIPPETS"}') AS a;
SELECT jsonb_object_keys(a) AS keys
FROM claims_list_records('{"cell_id": 1301, "source_type": "RAILS_TABLE_USERS", "claim_types": ["CLAIM_TYPE_USER_ID"]}') AS a;
-- GetCellsResponse: json names, int64 strings, a 0 minval left out
SELECT (SELECT jsonb_agg(e) FROM jsonb_array_elements(c -> 'cells') AS e WHERE e ->> 'id' IN ('1300', '1301', '1302')) AS cells
FROM claims_get_cells() AS c;
-- an operator's types are numbers (claims.v1 has no name for them), and
-- their claim field, which types.v1.Claim lacks, is left out
SELECT claims_begin_update(req(1301, jsonb_build_array(rec('WIKI_PAGE_SLUGS', 'grpc-wiki')))) #>> '{leaseUuid,value}' AS lw \gset
SELECT r #> '{record,metadata,bucket}' AS bucket, r #> '{record,metadata}' ? 'claim' AS has_claim
FROM claims_get_record('{"bucket": {"type": "WIKI_PAGE_SLUGS", "value": "grpc-wiki"}}') AS r;
SELECT claims_rollback(jsonb_build_object('cell_id', 1301, 'lease_uuid', :'lw')) AS rolled_back;
-- CommitUpdateResponse and RollbackUpdateResponse are {} in both modes
SELECT claims_commit(jsonb_build_object('cell_id', 1301, 'lease_uuid', :'begin_answer'::jsonb -> 'leaseUuid')) AS commit_again;
RESET claims.json_output;
-- and compat writes what it wrote before, with the operator's type by name
SELECT claims_begin_update(req(1301, jsonb_build_array(rec('WIKI_PAGE_SLUGS', 'grpc-wiki')))) ->> 'lease_uuid' AS lw \gset
SELECT r #> '{record,metadata,bucket}' AS bucket, r #> '{record,metadata,claim}' AS claim
FROM claims_get_record('{"bucket": {"type": "WIKI_PAGE_SLUGS", "value": "grpc-wiki"}}') AS r;
SELECT claims_rollback(1301, :'lw');
SELECT claims_list_leases('{"cell_id": 1301}') AS no_leases_compat;
SELECT a AS no_records_compat FROM claims_list_records('{"cell_id": 1301, "source_type": "RAILS_TABLE_SNIPPETS"}') AS a;
-- claim_types names the operator's type by its claim field too
SELECT records_of(claims_list_records('{"cell_id": 901, "source_type": "RAILS_TABLE_USERS", "claim_types": ["CLAIM_TYPE_WIKI_PAGE_SLUG"]}')) AS by_claim_type,
       records_of(claims_list_records('{"cell_id": 901, "source_type": "RAILS_TABLE_USERS", "claim_types": [19]}')) AS by_number;
-- a SET LOCAL lasts for its transaction
BEGIN;
SET LOCAL claims.json_output = proto3;
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "grpc-u1"}}') #> '{record}' ? 'cellId' AS proto3_inside;
COMMIT;
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "grpc-u1"}}') #> '{record}' ? 'cell_id' AS compat_after;
