-- cell_demo.sql: two cells race for values with ordinary SQL.
--
-- Run in database cell_1 by scripts/run.sh after cell_setup.sql, with the
-- environment variables CELL_2_PSQL (the psql command line of database
-- cell_2, with -e so it echoes what it runs), CLAIMS_DEMO_DIR (this
-- directory) and CLAIMS_DEMO_PEER_LOG (a file for cell 2's output).
-- Claimed columns are checked like unique constraints: at the end of each
-- statement by default, so the second cell's INSERT fails at once (55P03
-- while the first cell's transaction is open, 23505 once it committed);
-- a deferrable column switched with claims_cell.set_constraints() claims at
-- COMMIT instead, where the conflict then shows. Then a row written with the
-- triggers off is found by claims_cell.verify() and claimed by its repair.
-- Every step checks its outcome (demo_expect.sql) and stops the demo with
-- an error when it is not the expected one. Values are unique per run.

\set ON_ERROR_STOP 1
\set QUIET on
\pset pager off
SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS run \gset
\set name 'carol-' :run
\set route 'group-' :run
\set id :run
\set QUIET off
\set ECHO queries
\set VERBOSITY default

\echo
\echo '== 7. Two cell databases, cell_1 and cell_2, with claims_cell: the username and'
\echo '==    email of their users and the path of their routes are claimed at the store'
SELECT table_name, column_name, bucket_type, "deferrable" FROM claims_cell.claimed_columns ORDER BY 1, 2;

\echo
\echo '== 8. Cell 1 inserts' :name 'and keeps its transaction open: the INSERT leased'
\echo '==    the username and email at the store when the statement ended'
BEGIN;
INSERT INTO users VALUES (:id, :'name', :'name' || '@cell1.example');
\set expect 00000
\ir demo_expect.sql
SELECT count(*) AS leases_of_this_transaction FROM claims_cell.outstanding_leases;

\echo
\echo '== 9. Meanwhile cell 2 inserts the same username: its INSERT fails at once, as a'
\echo '==    unique constraint''s would while another transaction holds the value'
\echo '==    (expected: SQLSTATE 55P03, the value is under cell 1''s lease)'
\set sql 'INSERT INTO users VALUES (' :id ', ''' :name ''', ''' :name '@cell2.example'')'
\set expect 55P03
\ir cell_demo_peer.sql

\echo
\echo '== 10. Cell 1 commits: its COMMIT commits the lease, the username is cell 1''s'
COMMIT;
\set expect 00000
\ir demo_expect.sql
SELECT calls, begin_updates, commits, conflicts_permanent, breaker_state, in_flight
  FROM claims_cell.stats;

\echo
\echo '== 11. Cell 2 tries again: the username is taken for good'
\echo '==     (expected: SQLSTATE 23505, as a unique violation)'
\set expect 23505
\ir cell_demo_peer.sql

\echo
\echo '== Cell 1 has the row; cell 2 kept nothing'
SELECT count(*) AS cell_1_rows FROM users WHERE username = :'name';
\set sql 'SELECT count(*) AS cell_2_rows FROM users WHERE username = ''' :name ''''
\set expect 00000
\ir cell_demo_peer.sql

\echo
\echo '== 12. Cell 2 claims the route' :route '(routes.path is declared deferrable)'
\set sql 'INSERT INTO routes VALUES (' :id ', ''' :route ''')'
\set expect 00000
\ir cell_demo_peer.sql

\echo
\echo '== 13. Cell 1 defers its route claims to COMMIT, as SET CONSTRAINTS would: its'
\echo '==     INSERT of the same route succeeds (nothing is claimed yet) and the COMMIT'
\echo '==     meets cell 2''s claim (expected: SQLSTATE 23505 at COMMIT)'
BEGIN;
SELECT claims_cell.set_constraints('deferred', 'routes');
INSERT INTO routes VALUES (:id, :'route');
\set expect 00000
\ir demo_expect.sql
\set ON_ERROR_STOP 0
COMMIT;
\set ON_ERROR_STOP 1
\set expect 23505
\ir demo_expect.sql
SELECT count(*) AS cell_1_routes FROM routes WHERE path = :'route';

\echo
\echo '== 14. A row written with the triggers off, as a restore would write it: its values'
\echo '==     are not claimed. verify() finds them missing; with repair it claims them'
SET session_replication_role = replica;
INSERT INTO users VALUES (:id + 1, 'erin-' || :run, 'erin-' || :run || '@cell1.example');
RESET session_replication_role;
SELECT missing, extra, drifted, repaired FROM claims_cell.verify('users');
SELECT missing, extra, drifted, repaired FROM claims_cell.verify('users', repair => true);
SELECT missing = 0 AND extra = 0 AND drifted = 0 AS ok,
       format('%s missing, %s extra, %s drifted', missing, extra, drifted) AS outcome
  FROM claims_cell.verify('users') \gset
\set expected '0 missing, 0 extra, 0 drifted'
\ir demo_assert.sql

\echo
\echo '== Done: the cells are the databases cell_1 and cell_2 on the same server.'
