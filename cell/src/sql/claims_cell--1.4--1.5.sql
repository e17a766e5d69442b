/* claims_cell--1.4--1.5.sql: verify() compares in C; reconcile() never waits on a writer;
   partitioned tables and primary keys of several columns are claimed. */

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

#include "udfs/verify_row_range/1.5.sql"

#include "udfs/verify_slice/1.5.sql"

-- verify_repair(): a batch's fixes that fit one lease go to it as they
-- are, without being grouped into chunks again.
#include "udfs/verify_repair/1.5.sql"

-- reconcile(): a fence never waits on a local transaction still writing
-- the lease's row; that lease is left for a later pass.
#include "udfs/reconcile/1.5.sql"

-- ---------------------------------------------------------------------------
-- A source id of several columns: a primary key of several columns (every
-- partitioned table's includes its partition key) is claimed, its columns
-- in key order in source_attnums (source_attnum stays its first column;
-- NULL source_attnums: source_attnum alone).
-- ---------------------------------------------------------------------------
ALTER TABLE @extschema@.claimed_attributes
    ADD COLUMN source_attnums smallint[],
    ADD CONSTRAINT claimed_attributes_source_attnums_lead
        CHECK (source_attnums IS NULL OR (pg_catalog.cardinality(source_attnums) OPERATOR(pg_catalog.>=) 1
                                          AND source_attnums[1] OPERATOR(pg_catalog.=) source_attnum));
UPDATE @extschema@.claimed_attributes SET source_attnums = ARRAY[source_attnum];

CREATE OR REPLACE VIEW @extschema@.claimed_columns AS
SELECT c.table_name, a.attname AS column_name, c.bucket_type, c.subject_type,
       s.attname AS subject_column, c.source_type, k.attname AS source_column,
       c.enabled, c.trigger_name, c.created_at, c.updated_at,
       c."deferrable", c.initially_deferred,
       ARRAY(SELECT ka.attname
               FROM pg_catalog.unnest(COALESCE(c.source_attnums, ARRAY[c.source_attnum])) WITH ORDINALITY AS u(attnum, i)
               JOIN pg_catalog.pg_attribute ka ON ka.attrelid OPERATOR(pg_catalog.=) c.table_name
                                              AND ka.attnum OPERATOR(pg_catalog.=) u.attnum
              ORDER BY u.i) AS source_columns
  FROM @extschema@.claimed_attributes c
  JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.table_name AND a.attnum OPERATOR(pg_catalog.=) c.attnum
  JOIN pg_catalog.pg_attribute s ON s.attrelid OPERATOR(pg_catalog.=) c.table_name AND s.attnum OPERATOR(pg_catalog.=) c.subject_attnum
  JOIN pg_catalog.pg_attribute k ON k.attrelid OPERATOR(pg_catalog.=) c.table_name AND k.attnum OPERATOR(pg_catalog.=) c.source_attnum;

-- A partition detached from a claimed partitioned table: its rows' values
-- stay claimed at the store (as after unclaim_column), under the
-- partitioned table's source type, and verify() of that table leaves the
-- ones they still hold alone.
CREATE TABLE @extschema@.detached_partitions (
    table_name        regclass PRIMARY KEY,
    partitioned_table regclass NOT NULL,
    detached_at       timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE @extschema@.detached_partitions IS
    'Partitions detached from a claimed partitioned table, whose values stay claimed';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.detached_partitions', '');

#include "udfs/source_id_sql/1.5.sql"

#include "udfs/source_key_values/1.5.sql"

DROP FUNCTION @extschema@.rows_holding(regclass, smallint, text, smallint, smallint);
#include "udfs/rows_holding/1.5.sql"

#include "udfs/claim_again/1.5.sql"

-- a dropped column of the source key ends the declaration too
#include "udfs/forget_dropped/1.5.sql"

-- DDL on tables: claimed tables get no inheritance children (claim_column
-- refuses a table that has some); partitions of a claimed partitioned
-- table get their triggers.
#include "udfs/follow_table_ddl/1.5.sql"

CREATE EVENT TRIGGER claims_cell_follow_table_ddl ON ddl_command_end
    EXECUTE FUNCTION @extschema@.follow_table_ddl();
-- session_replication_role = replica does not switch it off
ALTER EVENT TRIGGER claims_cell_follow_table_ddl ENABLE ALWAYS;

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
