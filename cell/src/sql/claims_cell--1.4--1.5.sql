/* claims_cell--1.4--1.5.sql: verify() compares in C; reconcile() never waits on a writer. */

\echo Use "ALTER EXTENSION claims_cell UPDATE TO '1.5'" to load this file. \quit

-- Functions of earlier versions created again as they are, with their
-- comments and privileges beside them, so that udfs/NAME/latest.sql is the
-- whole current definition. configure(), set_claiming() and
-- unclaim_column() got their pinned search path from ALTER FUNCTION in 1.4;
-- their definitions now carry it.
#include "udfs/store_validator/1.5.sql"
#include "udfs/configure/1.5.sql"
#include "udfs/set_claiming/1.5.sql"
#include "udfs/unclaim_column/1.5.sql"
#include "udfs/collect/1.5.sql"
#include "udfs/refuse_truncate/1.5.sql"
#include "udfs/store_list_leases/1.5.sql"
#include "udfs/store_finish_lease/1.5.sql"
#include "udfs/reconcile_settings/1.5.sql"
#include "udfs/store_list_records/1.5.sql"
#include "udfs/store_repair_lease/1.5.sql"
#include "udfs/verify_settings/1.5.sql"
#include "udfs/source_id_text/1.5.sql"
#include "udfs/verify_range/1.5.sql"
#include "udfs/verify_list_store/1.5.sql"
#include "udfs/verify_repair_lease/1.5.sql"
#include "udfs/verify/1.5.sql"
#include "udfs/verify_due/1.5.sql"
#include "udfs/running_transactions/1.5.sql"
#include "udfs/transactions_ended/1.5.sql"
#include "udfs/stats/1.5.sql"

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
    EXECUTE FUNCTION @extschema@.refuse_inheritance();
-- session_replication_role = replica does not switch it off
ALTER EVENT TRIGGER claims_cell_refuse_inheritance ENABLE ALWAYS;

-- Children a claimed table got before 1.5: their rows are not claimed.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT DISTINCT i.inhrelid::pg_catalog.regclass AS child, i.inhparent::pg_catalog.regclass AS parent
               FROM pg_catalog.pg_inherits i
               JOIN @extschema@.claimed_attributes c ON c.table_name OPERATOR(pg_catalog.=) i.inhparent
    LOOP
        RAISE WARNING 'table % inherits from table %, which has claimed columns: the child''s rows are not claimed', r.child, r.parent
            USING HINT = 'ALTER TABLE ... NO INHERIT, then claim the child''s columns on their own and run claims_cell.verify() with repair.';
    END LOOP;
END
$$;
