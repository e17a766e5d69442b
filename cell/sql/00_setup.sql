-- The extension, its objects and the store's foreign-data wrapper.
\set VERBOSITY terse
CREATE EXTENSION claims_cell;
SELECT extrelocatable, n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE extname = 'claims_cell';
SELECT fdwname, fdwhandler = 0 AS no_handler, fdwvalidator::regproc FROM pg_foreign_data_wrapper;
SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'claims_cell'::regnamespace
   AND c.relkind IN ('r', 'v') ORDER BY 1;
SELECT scope, calls, breaker_state, in_flight FROM claims_cell.stats;
-- nobody but the superuser touches the tables and functions
SELECT has_table_privilege('public', 'claims_cell.outstanding_leases', 'SELECT') AS public_reads_leases,
       has_function_privilege('public', 'claims_cell.configure(name, bigint)', 'EXECUTE') AS public_configures;
