-- demo.sql: a short tour of the claims API for psql.
--
-- Two cells (1 and 2), each acting as its own database role (cell_1 and
-- cell_2, registered with the store), compete for the same username: cell 1
-- leases it, cell 2 is refused while the lease is outstanding (SQLSTATE
-- 55P03) and after cell 1 commits (23505); cell 2 cannot act in cell 1's
-- name either (42501); cell 2 leases another name and rolls it back; finally
-- cell 1 releases its name again.
--
-- Run it with: psql -X -h 127.0.0.1 -p 5499 -U claims -f scripts/demo.sql claims
-- as a superuser (scripts/run.sh does). The roles and cells are created and
-- registered when missing, and values are unique per run, so it can be run
-- any number of times on the same database. Every step that must fail checks
-- its SQLSTATE (demo_expect.sql) and stops the demo when it is another.

\set ON_ERROR_STOP 1
\set QUIET on
\pset pager off
SET search_path = public;
\set QUIET off
\set ECHO queries
\set VERBOSITY verbose

\echo
\echo '== 0. An administrator (here the superuser) creates a role for each cell and'
\echo '==    registers the cell with it; a cell then acts only as its own role'
SET client_min_messages = warning;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cell_1') THEN
        CREATE ROLE cell_1 LOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cell_2') THEN
        CREATE ROLE cell_2 LOGIN;
    END IF;
END
$$;
SELECT claims_register_cell(1, 'cell-1', 'cell_1', 'demo')
WHERE NOT EXISTS (SELECT 1 FROM claim_cells WHERE cell_id = 1);
SELECT claims_register_cell(2, 'cell-2', 'cell_2', 'demo')
WHERE NOT EXISTS (SELECT 1 FROM claim_cells WHERE cell_id = 2);
RESET client_min_messages;
SELECT cell_id, name, role_name, disabled FROM claim_cells WHERE cell_id IN (1, 2) ORDER BY cell_id;

-- A suffix unique to this run.
SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS run \gset
\set alice 'alice-' :run
\set bob 'bob-' :run
\echo
\echo '== Usernames for this run:' :alice 'and' :bob

\echo
\echo '== 1. Cell 1 (role cell_1) starts claiming' :alice '(a lease: nothing is final yet)'
SET ROLE cell_1;
SELECT response, response ->> 'lease_uuid' AS lease
FROM claims_begin_update(jsonb_build_object(
    'cell_id', 1,
    'create_records', jsonb_build_array(jsonb_build_object(
        'bucket', jsonb_build_object('type', 'USERNAMES', 'value', :'alice'),
        'subject', jsonb_build_object('type', 'USER', 'id', 42),
        'source', jsonb_build_object('type', 'RAILS_TABLE_USERS', 'rails_primary_key_id', 42))),
    'destroy_records', '[]'::jsonb)) AS response \gset cell1_
\echo 'begin_update returned:' :cell1_response

\echo
\echo '== The record is held by the lease, and the lease is outstanding'
SELECT jsonb_pretty(claims_get_record(jsonb_build_object(
    'bucket', jsonb_build_object('type', 'USERNAMES', 'value', :'alice')))) AS record;
SELECT jsonb_pretty(claims_list_leases('{"cell_id": 1}')) AS cell_1_leases;

\echo
\echo '== 2. Cell 2 (role cell_2) tries to claim' :alice 'while cell 1''s lease is outstanding'
\echo '==    (expected: an error with SQLSTATE 55P03)'
SET ROLE cell_2;
\set ON_ERROR_STOP 0
SELECT claims_begin_update(jsonb_build_object(
    'cell_id', 2,
    'create_records', jsonb_build_array(jsonb_build_object(
        'bucket', jsonb_build_object('type', 'USERNAMES', 'value', :'alice'),
        'subject', jsonb_build_object('type', 'USER', 'id', 7),
        'source', jsonb_build_object('type', 'RAILS_TABLE_USERS', 'rails_primary_key_id', 7))),
    'destroy_records', '[]'::jsonb));
\set ON_ERROR_STOP 1
\set expect 55P03
\ir demo_expect.sql

\echo
\echo '== 2b. Cell 2 tries to commit cell 1''s lease in cell 1''s name'
\echo '==     (expected: an error with SQLSTATE 42501: role cell_2 may not act for cell 1)'
\set ON_ERROR_STOP 0
SELECT claims_commit(1, :'cell1_lease');
\set ON_ERROR_STOP 1
\set expect 42501
\ir demo_expect.sql

\echo
\echo '== 3. Cell 1 commits its lease:' :alice 'is now ACTIVE and owned by cell 1'
SET ROLE cell_1;
SELECT claims_commit(1, :'cell1_lease');
SELECT jsonb_pretty(claims_get_record(jsonb_build_object(
    'bucket', jsonb_build_object('type', 'USERNAMES', 'value', :'alice')))) AS record;

\echo
\echo '== 4. Cell 2 tries again now that the claim is committed'
\echo '==    (expected: an error with SQLSTATE 23505)'
SET ROLE cell_2;
\set ON_ERROR_STOP 0
SELECT claims_begin_update(jsonb_build_object(
    'cell_id', 2,
    'create_records', jsonb_build_array(jsonb_build_object(
        'bucket', jsonb_build_object('type', 'USERNAMES', 'value', :'alice'),
        'subject', jsonb_build_object('type', 'USER', 'id', 7),
        'source', jsonb_build_object('type', 'RAILS_TABLE_USERS', 'rails_primary_key_id', 7))),
    'destroy_records', '[]'::jsonb));
\set ON_ERROR_STOP 1
\set expect 23505
\ir demo_expect.sql

\echo
\echo '== 5. Cell 2 leases' :bob 'instead, then rolls the lease back'
SELECT response, response ->> 'lease_uuid' AS lease
FROM claims_begin_update(jsonb_build_object(
    'cell_id', 2,
    'create_records', jsonb_build_array(jsonb_build_object(
        'bucket', jsonb_build_object('type', 'USERNAMES', 'value', :'bob'),
        'subject', jsonb_build_object('type', 'USER', 'id', 7),
        'source', jsonb_build_object('type', 'RAILS_TABLE_USERS', 'rails_primary_key_id', 7))),
    'destroy_records', '[]'::jsonb)) AS response \gset cell2_
\echo 'begin_update returned:' :cell2_response
SELECT jsonb_pretty(claims_list_leases('{"cell_id": 2}')) AS cell_2_leases;
SELECT claims_rollback(2, :'cell2_lease');
\echo 'After the rollback' :bob 'is unclaimed again (get_record returns NULL):'
SELECT claims_get_record(jsonb_build_object(
    'bucket', jsonb_build_object('type', 'USERNAMES', 'value', :'bob'))) IS NULL AS unclaimed;

\echo
\echo '== 6. Cell 1 releases' :alice '(a lease that destroys the record, then commit)'
SET ROLE cell_1;
SELECT response, response ->> 'lease_uuid' AS lease
FROM claims_begin_update(jsonb_build_object(
    'cell_id', 1,
    'create_records', '[]'::jsonb,
    'destroy_records', jsonb_build_array(jsonb_build_object(
        'bucket', jsonb_build_object('type', 'USERNAMES', 'value', :'alice'))))) AS response \gset release_
\echo 'begin_update returned:' :release_response
SELECT claims_commit(1, :'release_lease');
SELECT claims_get_record(jsonb_build_object(
    'bucket', jsonb_build_object('type', 'USERNAMES', 'value', :'alice'))) IS NULL AS unclaimed;

RESET ROLE;

\echo
\echo '== Done: both cells have no outstanding lease from this run.'
