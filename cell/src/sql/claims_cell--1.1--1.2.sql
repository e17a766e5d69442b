/* claims_cell--1.1--1.2.sql: the background worker's counters in stats. */

\echo Use "ALTER EXTENSION claims_cell UPDATE TO '1.2'" to load this file. \quit

-- stats gains the reconcile() passes of the background worker; the view
-- is recreated over the new function (its columns are the function's).
DROP VIEW @extschema@.stats;
DROP FUNCTION @extschema@.stats();

#include "udfs/stats/1.2.sql"

CREATE VIEW @extschema@.stats AS SELECT * FROM @extschema@.stats();

REVOKE ALL ON FUNCTION @extschema@.stats() FROM PUBLIC;
REVOKE ALL ON @extschema@.stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.stats() TO pg_monitor;
GRANT SELECT ON @extschema@.stats TO pg_monitor;

#include "udfs/reconcile/1.2.sql"
