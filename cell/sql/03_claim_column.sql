-- claim_column: local refusals first, then the store (unreachable here).
\set VERBOSITY terse
CREATE TABLE no_pk (id bigint, username text);
CREATE TABLE two_pk (a int, b float8, username text, PRIMARY KEY (a, b));
CREATE TABLE float_pk (id float8 PRIMARY KEY, uid int, username text);
CREATE VIEW users_v AS SELECT * FROM users;
SELECT claims_cell.claim_column('missing', 'username', 'USERNAMES', 'USER', 'id');
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.claim_column('users', 'usrname', 'USERNAMES', 'USER', 'id');
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'uid');
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'name');
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.claim_column('no_pk', 'username', 'USERNAMES', 'USER', 'id');
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.claim_column('two_pk', 'username', 'USERNAMES', 'USER', 'a');
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.claim_column('float_pk', 'username', 'USERNAMES', 'USER', 'uid');
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.claim_column('users_v', 'username', 'USERNAMES', 'USER', 'id');
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.claim_column('users', 'username', NULL, 'USER', 'id');
\echo :LAST_ERROR_SQLSTATE
-- the store is down: 08006, and nothing is recorded
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM claims_cell.claimed_columns;
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'users'::regclass;
SELECT claims_cell.set_claiming('users', 'username', false);
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.unclaim_column('users', 'username');
\echo :LAST_ERROR_SQLSTATE
