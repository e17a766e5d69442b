-- cell_setup.sql: make this database a cell of the demo store (scripts/run.sh).
--
-- Variables: cell_id, store_host, store_port, store_db. The cell logs in to
-- the store as role cell_<cell_id>, which scripts/demo.sql creates and
-- registers. Safe to run again: every step is skipped when already done.

\set ON_ERROR_STOP 1
\set QUIET on
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS claims_cell;
DROP SERVER IF EXISTS topology CASCADE;
CREATE SERVER topology FOREIGN DATA WRAPPER claims_cell_store
    OPTIONS (host :'store_host', port :'store_port', dbname :'store_db');
\set cell_role 'cell_' :cell_id
CREATE USER MAPPING FOR PUBLIC SERVER topology OPTIONS (user :'cell_role', password_required 'false');
SELECT claims_cell.configure('topology', :cell_id);
CREATE TABLE IF NOT EXISTS users (id bigint PRIMARY KEY, username text, email text);
SELECT claims_cell.claim_column('users', 'username', bucket_type => 'USERNAMES',
                                subject_type => 'USER', subject_column => 'id')
 WHERE NOT EXISTS (SELECT 1 FROM claims_cell.claimed_columns
                    WHERE table_name = 'users'::regclass AND column_name = 'username');
SELECT claims_cell.claim_column('users', 'email', bucket_type => 'EMAILS',
                                subject_type => 'USER', subject_column => 'id')
 WHERE NOT EXISTS (SELECT 1 FROM claims_cell.claimed_columns
                    WHERE table_name = 'users'::regclass AND column_name = 'email');
-- a deferrable declaration: claims at the statement unless set_constraints()
-- defers it to COMMIT (the demo's step 13)
CREATE TABLE IF NOT EXISTS routes (id bigint PRIMARY KEY, path text);
SELECT claims_cell.claim_column('routes', 'path', bucket_type => 'ROUTES',
                                subject_type => 'NAMESPACE', subject_column => 'id',
                                "deferrable" => true)
 WHERE NOT EXISTS (SELECT 1 FROM claims_cell.claimed_columns
                    WHERE table_name = 'routes'::regclass AND column_name = 'path');
