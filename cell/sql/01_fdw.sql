-- The validator: libpq options on servers, login options on user mappings.
\set VERBOSITY terse
CREATE SERVER topology FOREIGN DATA WRAPPER claims_cell_store
  OPTIONS (host '127.0.0.1', port '1', dbname 'topology', sslmode 'disable');
CREATE USER MAPPING FOR PUBLIC SERVER topology OPTIONS (user 'cell_one', password 'secret');
-- unknown options
CREATE SERVER bad1 FOREIGN DATA WRAPPER claims_cell_store OPTIONS (hots 'x');
\echo :LAST_ERROR_SQLSTATE
-- credentials belong to the user mapping, not the server
CREATE SERVER bad2 FOREIGN DATA WRAPPER claims_cell_store OPTIONS (password 'x');
CREATE SERVER bad3 FOREIGN DATA WRAPPER claims_cell_store OPTIONS (user 'x');
-- and connection options to the server
CREATE USER MAPPING FOR CURRENT_USER SERVER topology OPTIONS (host 'x');
-- what the extension controls itself
-- each host's connection bound: whole seconds, on the server only
CREATE SERVER timed FOREIGN DATA WRAPPER claims_cell_store OPTIONS (connect_timeout '2');
DROP SERVER timed;
CREATE SERVER bad4 FOREIGN DATA WRAPPER claims_cell_store OPTIONS (connect_timeout '2.5');
CREATE USER MAPPING FOR CURRENT_USER SERVER topology OPTIONS (connect_timeout '2');
CREATE SERVER bad5 FOREIGN DATA WRAPPER claims_cell_store OPTIONS (replication 'database');
-- TLS client certificates are login options
CREATE USER MAPPING FOR CURRENT_USER SERVER topology
  OPTIONS (user 'cell_one', sslcert '/c.crt', sslkey '/c.key', sslrootcert '/ca.crt');
ALTER USER MAPPING FOR CURRENT_USER SERVER topology OPTIONS (ADD bogus 'x');
DROP USER MAPPING FOR CURRENT_USER SERVER topology;
-- the wrapper itself takes nothing
ALTER FOREIGN DATA WRAPPER claims_cell_store OPTIONS (host 'x');
SELECT srvname, srvoptions FROM pg_foreign_server;
-- credentials are not readable by everyone
CREATE ROLE regress_app;
SET ROLE regress_app;
SELECT srvname, usename, umoptions FROM pg_user_mappings;
RESET ROLE;
