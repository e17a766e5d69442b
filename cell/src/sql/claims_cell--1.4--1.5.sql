/* claims_cell--1.4--1.5.sql: verify() compares in C; reconcile() never waits on a writer. */

\echo Use "ALTER EXTENSION claims_cell UPDATE TO '1.5'" to load this file. \quit

#include "udfs/store_list_records_page/1.5.sql"

#include "udfs/verify_list_store_pages/1.5.sql"

#include "udfs/verify_compare/1.5.sql"

#include "udfs/verify_keep_fixes/1.5.sql"

#include "udfs/verify_slice/1.5.sql"

-- verify_repair(): a batch's fixes that fit one lease go to it as they
-- are, without being grouped into chunks again.
#include "udfs/verify_repair/1.5.sql"

-- reconcile(): a fence never waits on a local transaction still writing
-- the lease's row; that lease is left for a later pass.
#include "udfs/reconcile/1.5.sql"

-- Claimed tables get no inheritance children (claim_column refuses a table
-- that has some).
#include "udfs/refuse_inheritance/1.5.sql"

CREATE EVENT TRIGGER claims_cell_refuse_inheritance ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE')
    EXECUTE FUNCTION @extschema@.refuse_inheritance();
