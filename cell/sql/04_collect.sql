-- The row trigger without a store: what fails at the statement, what
-- never contacts the store, and what fails at COMMIT (08006).
\set VERBOSITY terse
CREATE TABLE accounts (id bigint PRIMARY KEY, username text, project_id text, owner_id int);
-- the trigger claim_column would install (claim_column needs the store)
CREATE TRIGGER claims_cell_username AFTER INSERT OR UPDATE OR DELETE ON accounts
  FOR EACH ROW EXECUTE FUNCTION claims_cell.collect('2', 'USERNAMES', 'USER', '1',
  'RAILS_TABLE_USERS', '1', 'f');
CREATE TRIGGER claims_cell_project_id AFTER INSERT OR UPDATE OR DELETE ON accounts
  FOR EACH ROW EXECUTE FUNCTION claims_cell.collect('3', 'PROJECT_IDS', 'USER', '1',
  'RAILS_TABLE_USERS', '1', 't');
CREATE TRIGGER claims_cell_truncate BEFORE TRUNCATE ON accounts
  FOR EACH STATEMENT EXECUTE FUNCTION claims_cell.refuse_truncate();
-- NULL and blank values are not claimed: no store call, the commit succeeds
SELECT calls AS calls_before FROM claims_cell.stats \gset
INSERT INTO accounts VALUES (1, NULL, NULL), (2, '', ' '), (3, E' \t ', NULL);
SELECT calls - :calls_before AS store_calls FROM claims_cell.stats;
-- values that can never be valid fail at the statement
INSERT INTO accounts VALUES (4, repeat('x', 1025));
\echo :LAST_ERROR_SQLSTATE
INSERT INTO accounts VALUES (4, NULL, '042');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO accounts VALUES (4, NULL, '+42');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO accounts VALUES (4, NULL, '-0');
\echo :LAST_ERROR_SQLSTATE
-- TRUNCATE is refused
TRUNCATE accounts;
\echo :LAST_ERROR_SQLSTATE
-- a claimed value at COMMIT with the store down: 08006, nothing kept
INSERT INTO accounts VALUES (10, 'alice');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM accounts WHERE id = 10;
SELECT count(*) FROM claims_cell.outstanding_leases;
-- changes of a rolled back savepoint are forgotten
BEGIN;
SAVEPOINT s1;
INSERT INTO accounts VALUES (11, 'bob');
ROLLBACK TO SAVEPOINT s1;
INSERT INTO accounts VALUES (12, NULL);
COMMIT;
SELECT id FROM accounts WHERE id IN (11, 12) ORDER BY id;
-- a released savepoint hands its changes to the transaction
BEGIN;
SAVEPOINT s1;
INSERT INTO accounts VALUES (13, 'carol');
RELEASE SAVEPOINT s1;
COMMIT;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM accounts WHERE id = 13;
-- an insert and a delete of the same row in one transaction cancel out
BEGIN;
INSERT INTO accounts VALUES (14, 'dave');
DELETE FROM accounts WHERE id = 14;
COMMIT;
-- an update that changes only an unrelated column claims nothing
UPDATE accounts SET owner_id = 7 WHERE id = 1;
SELECT calls - :calls_before AS store_calls_by_failed_commits, failures > 0 AS failures_counted
  FROM claims_cell.stats;
-- PREPARE TRANSACTION with claims is refused
BEGIN;
INSERT INTO accounts VALUES (15, 'erin');
PREPARE TRANSACTION 'p1';
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM pg_prepared_xacts;
-- ... and allowed without
BEGIN;
INSERT INTO accounts VALUES (16, NULL);
PREPARE TRANSACTION 'p2';
COMMIT PREPARED 'p2';
SELECT count(*) FROM accounts WHERE id = 16;
