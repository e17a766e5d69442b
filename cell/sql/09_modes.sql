-- Immediate and deferred claims without a store: claim_column's and
-- set_constraints' refusals, and a deferred column's changes kept to
-- COMMIT (where the store is missing: 08006) while an immediate one's
-- fail at the statement.
\set VERBOSITY terse
CREATE TABLE modes (id bigint PRIMARY KEY, imm text, def text, dfi text);
-- the triggers claim_column would install: immediate, deferred ('d' is
-- the seven-argument form), deferrable initially immediate
CREATE TRIGGER claims_cell_imm AFTER INSERT OR UPDATE OR DELETE ON modes
  FOR EACH ROW EXECUTE FUNCTION claims_cell.collect('2', 'USERNAMES', 'USER', '1',
  'RAILS_TABLE_USERS', '1', 'f', 'i');
CREATE TRIGGER claims_cell_def AFTER INSERT OR UPDATE OR DELETE ON modes
  FOR EACH ROW EXECUTE FUNCTION claims_cell.collect('3', 'EMAILS', 'USER', '1',
  'RAILS_TABLE_USERS', '1', 'f');
CREATE TRIGGER claims_cell_dfi AFTER INSERT OR UPDATE OR DELETE ON modes
  FOR EACH ROW EXECUTE FUNCTION claims_cell.collect('4', 'ROUTES', 'USER', '1',
  'RAILS_TABLE_USERS', '1', 'f', 'e');
CREATE TRIGGER claims_cell_statement AFTER INSERT OR UPDATE OR DELETE ON modes
  FOR EACH STATEMENT EXECUTE FUNCTION claims_cell.claim_statement();
-- initially deferred needs deferrable
SELECT claims_cell.claim_column('modes', 'imm', 'USERNAMES', 'USER', 'id', NULL, false, true);
\echo :LAST_ERROR_SQLSTATE
-- set_constraints: its mode, a column that is not deferrable, one not claimed
SELECT claims_cell.set_constraints('later');
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT claims_cell.set_constraints('DEFERRED', 'modes', 'imm');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SELECT claims_cell.set_constraints('DEFERRED', 'modes', 'id');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- outside a transaction block it only warns
SELECT claims_cell.set_constraints('DEFERRED');
-- the store is unreachable: only the SQLSTATE, whatever the breaker says
\set VERBOSITY sqlstate
-- an immediate column: the statement fails
INSERT INTO modes (id, imm) VALUES (1, 'alice');
\echo :LAST_ERROR_SQLSTATE
-- a deferred column: the statement succeeds, the COMMIT fails
BEGIN;
INSERT INTO modes (id, def) VALUES (2, 'a@example.com');
\echo :ERROR
COMMIT;
\echo :LAST_ERROR_SQLSTATE
-- a deferrable, initially immediate column deferred for the transaction
BEGIN;
SELECT claims_cell.set_constraints('DEFERRED', 'modes');
INSERT INTO modes (id, dfi) VALUES (3, 'r/3');
\echo :ERROR
-- switched back: what was deferred is claimed now, and fails
SELECT claims_cell.set_constraints('IMMEDIATE', 'modes', 'dfi');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT count(*) FROM modes;
SELECT count(*) FROM claims_cell.outstanding_leases;
DROP TABLE modes;
