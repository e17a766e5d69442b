-- The background worker's settings and counters.
\set VERBOSITY terse
-- where leases are finished: a superuser setting with two values
SHOW claims_cell.finish_leases_in;
SET claims_cell.finish_leases_in = 'worker';
SHOW claims_cell.finish_leases_in;
SET claims_cell.finish_leases_in = 'elsewhere';
RESET claims_cell.finish_leases_in;
CREATE ROLE regress_worker_app;
SET ROLE regress_worker_app;
SET claims_cell.finish_leases_in = 'worker';
RESET ROLE;
DROP ROLE regress_worker_app;
-- the worker's database and interval are set in postgresql.conf
SHOW claims_cell.database;
SET claims_cell.database = 'elsewhere';
SHOW claims_cell.reconcile_interval;
SET claims_cell.reconcile_interval = '5s';
-- no worker runs here: its counters are zero and it never passed
SELECT reconcile_passes, reconcile_committed, reconcile_rolled_back,
       reconcile_orphans_deleted, last_reconcile
  FROM claims_cell.stats;
-- the installed version is the one the control file names
SELECT e.extversion = a.default_version AS default_version_installed
  FROM pg_extension e JOIN pg_available_extensions a ON a.name = e.extname
 WHERE e.extname = 'claims_cell';
