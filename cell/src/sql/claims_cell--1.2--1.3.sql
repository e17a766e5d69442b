/* claims_cell--1.2--1.3.sql: verify(), its repairs, and its schedule. */

\echo Use "ALTER EXTENSION claims_cell UPDATE TO '1.3'" to load this file. \quit

#include "udfs/store_list_records/1.3.sql"

#include "udfs/store_repair_lease/1.3.sql"

#include "udfs/verify_settings/1.3.sql"

-- Where the background worker's verification of each claimed table stands:
-- a run under way resumes after resume_after (a source id) after a restart.
CREATE TABLE @extschema@.verify_progress (
    table_name       regclass PRIMARY KEY,
    run_started_at   timestamptz,
    resume_after     bytea,
    missing          bigint NOT NULL DEFAULT 0,
    extra            bigint NOT NULL DEFAULT 0,
    drifted          bigint NOT NULL DEFAULT 0,
    repaired         bigint NOT NULL DEFAULT 0,
    skipped_recent   bigint NOT NULL DEFAULT 0,
    last_finished_at timestamptz,
    last_error       text,
    last_error_at    timestamptz
);
COMMENT ON TABLE @extschema@.verify_progress IS
    'The background worker''s verification of each claimed table: the run under way (counts so far) or the last one';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.verify_progress', '');

#include "udfs/source_id_text/1.3.sql"

/*
 * The condition on a table's key (key_expr: t.id, or a text key in the "C"
 * collation) of the source ids in (lo, hi] in the store's order, bytes;
 * NULL ends are open. Integer keys are 8 bytes big-endian two's
 * complement: the non-negative keys come first, then the negative ones.
 */
#include "udfs/verify_range/1.3.sql"

/*
 * The cell's records at the store of the claimed columns attrs (as
 * verify_slice() builds them) with source ids in (lo, hi], NULL ends open:
 * every page of claims_list_records per source type, as one array.
 */
#include "udfs/verify_list_store/1.3.sql"

/*
 * One slice of a verification of one table: from the source id after
 * resume_after (NULL: the start), batches of 1000 rows in source id order
 * (the store's order: bytes), each compared with the store's records of
 * the same range (resume_after, last source id of the batch]; the last
 * batch's range is open, so records past the table's last row are seen.
 * Stops after the batch that passes deadline (NULL: at the end). With
 * repair, fixes go in leases of at most 1000 records taken in this
 * transaction (see verify()).
 */
#include "udfs/verify_slice/1.3.sql"

/*
 * Repair what verify_slice() found, in leases of at most chunk_limit
 * records: a missing value is created, an extra one destroyed, a drifted
 * one replaced (the same value in both lists: the store keeps it claimed
 * by this cell throughout, never destroyed and created). A lease the
 * store refuses is retried one value at a time; a value it refuses alone
 * is reported and left. Returns the number of values repaired.
 */
#include "udfs/verify_repair/1.3.sql"

#include "udfs/verify_repair_lease/1.3.sql"

/*
 * verify(table, repair): compare a claimed table with the cell's claims at
 * the store; with repair, fix the differences in leases committed by this
 * transaction.
 */
#include "udfs/verify/1.3.sql"

/*
 * verify_due(): the background worker's verifications, one slice (about
 * max_time) of the claimed tables whose turn it is: each table every
 * claims_cell.verify_interval, the first time at an offset of its own
 * within the interval (tables do not all come at once). A run resumes
 * where it stopped (verify_progress). Repairs what it finds. One row per
 * table worked on.
 */
#include "udfs/verify_due/1.3.sql"

#include "udfs/forget_dropped/1.3.sql"

-- stats gains the background worker's verifications
DROP VIEW @extschema@.stats;
DROP FUNCTION @extschema@.stats();

#include "udfs/stats/1.3.sql"

CREATE VIEW @extschema@.stats AS SELECT * FROM @extschema@.stats();

REVOKE ALL ON FUNCTION @extschema@.stats() FROM PUBLIC;
REVOKE ALL ON @extschema@.stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.stats() TO pg_monitor;
GRANT SELECT ON @extschema@.stats TO pg_monitor;

REVOKE ALL ON TABLE @extschema@.verify_progress FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.store_list_records(name, jsonb),
    @extschema@.store_repair_lease(name, bigint, jsonb, jsonb),
    @extschema@.verify_settings(),
    @extschema@.source_id_text(bytea),
    @extschema@.verify_range(text, regtype, text, bytea, bytea),
    @extschema@.verify_list_store(name, bigint, jsonb, bytea, bytea),
    @extschema@.verify_slice(regclass, boolean, bytea, timestamptz),
    @extschema@.verify_repair(name, bigint, regclass, jsonb, integer),
    @extschema@.verify_repair_lease(name, bigint, jsonb),
    @extschema@.verify(regclass, boolean),
    @extschema@.verify_due(interval) FROM PUBLIC;
