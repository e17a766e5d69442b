-- cell_demo.sql: two cells race for a username with ordinary INSERTs.
--
-- Run in database cell_1 by scripts/run.sh after cell_setup.sql; the
-- environment variable CELL_2_PSQL is the psql command line of database
-- cell_2 (with -e, so it echoes what it runs). Both cells
-- insert the same username in their own database, which each accepts; the
-- first COMMIT claims it at the store, the second fails with SQLSTATE 23505
-- as a unique constraint would. Then a row written with the triggers off
-- is found by claims_cell.verify() and claimed by its repair. Values are
-- unique per run.

\set ON_ERROR_STOP 1
\set QUIET on
\pset pager off
SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS run \gset
\set name 'carol-' :run
\set id :run
\set QUIET off
\set ECHO queries
\set VERBOSITY default

\echo
\echo '== 7. Two cell databases, cell_1 and cell_2, with claims_cell: the username and'
\echo '==    email columns of their users tables are claimed at the store'
SELECT table_name, column_name, bucket_type FROM claims_cell.claimed_columns ORDER BY 2;

\echo
\echo '== 8. Cell 1 inserts' :name 'and keeps its transaction open: nothing is claimed yet'
BEGIN;
INSERT INTO users VALUES (:id, :'name', :'name' || '@cell1.example');

\echo
\echo '== 9. Meanwhile cell 2 inserts the same username and commits first: it wins'
\set sql 'INSERT INTO users VALUES (' :id ', ''' :name ''', ''' :name '@cell2.example'')'
\setenv CELL_SQL :sql
\! $CELL_2_PSQL -c "$CELL_SQL"


\echo
\echo '== 10. Cell 1 commits: the store says the username is taken (expected: SQLSTATE 23505)'
\set ON_ERROR_STOP 0
COMMIT;
\set ON_ERROR_STOP 1
\echo 'SQLSTATE of that error:' :LAST_ERROR_SQLSTATE

\echo
\echo '== Cell 1 kept nothing; cell 2 has the row'
SELECT count(*) AS cell_1_rows FROM users WHERE username = :'name';
\set sql 'SELECT id, username, email FROM users WHERE username = ''' :name ''''
\setenv CELL_SQL :sql
\! $CELL_2_PSQL -c "$CELL_SQL"


\echo
\echo '== 11. Cell 1 takes another username and commits: the COMMIT claims it'
INSERT INTO users VALUES (:id, 'dave-' || :run, 'dave-' || :run || '@cell1.example');
SELECT calls, begin_updates, commits, conflicts_permanent, breaker_state, in_flight
  FROM claims_cell.stats;

\echo
\echo '== 12. A row written with the triggers off, as a restore would write it: its values'
\echo '==     are not claimed. verify() finds them missing; with repair it claims them'
SET session_replication_role = replica;
INSERT INTO users VALUES (:id + 1, 'erin-' || :run, 'erin-' || :run || '@cell1.example');
RESET session_replication_role;
SELECT missing, extra, drifted, repaired FROM claims_cell.verify('users');
SELECT missing, extra, drifted, repaired FROM claims_cell.verify('users', repair => true);
SELECT missing, extra, drifted, repaired FROM claims_cell.verify('users');

\echo
\echo '== Done: the cells are the databases cell_1 and cell_2 on the same server.'
