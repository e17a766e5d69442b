-- configure: a server of claims_cell_store and a positive cell id.
\set VERBOSITY terse
CREATE FOREIGN DATA WRAPPER other_fdw;
CREATE SERVER other FOREIGN DATA WRAPPER other_fdw;
SELECT claims_cell.configure('nope', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.configure('other', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.configure('topology', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.configure(NULL, 1);
\echo :LAST_ERROR_SQLSTATE
-- claim_column before configure
CREATE TABLE users (id bigint PRIMARY KEY, username text, name text);
SELECT claims_cell.claim_column('users', 'username', bucket_type => 'USERNAMES',
       subject_type => 'USER', subject_column => 'id', source_type => 'RAILS_TABLE_USERS');
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.configure('topology', 1);
SELECT claims_cell.configure(server_name => 'topology', cell_id => 2);
SELECT server_name, cell_id FROM claims_cell.configuration;
SELECT claims_cell.configure('topology', 1);
