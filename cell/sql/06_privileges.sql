-- Who may read the stats and call the extension's functions.
\set VERBOSITY terse
CREATE ROLE regress_monitor IN ROLE pg_monitor;
SET ROLE regress_monitor;
SELECT scope, calls >= 0 AS reads_calls FROM claims_cell.stats;
RESET ROLE;
-- the trigger and validator functions are not PUBLIC's to call
SELECT has_function_privilege('public', 'claims_cell.collect()', 'EXECUTE') AS public_collects,
       has_function_privilege('public', 'claims_cell.refuse_truncate()', 'EXECUTE') AS public_refuses,
       has_function_privilege('public', 'claims_cell.store_validator(text[], oid)', 'EXECUTE')
         AS public_validates;
DROP ROLE regress_monitor;
