/* claims_cell--1.3--1.4.sql: the cell side hardened. */

\echo Use "ALTER EXTENSION claims_cell UPDATE TO '1.4'" to load this file. \quit

-- The administrator functions written in C run their SQL under a pinned
-- search path, as the PL/pgSQL ones do: a name the caller's path resolves
-- (an operator planted in public by a database owner) must never run with
-- a superuser's privileges.
ALTER FUNCTION @extschema@.configure(name, bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.claim_column(regclass, name, text, text, name, text)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.set_claiming(regclass, name, boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.unclaim_column(regclass, name) SET search_path = pg_catalog, pg_temp;

-- stats gains the destroys of values the store did not hold: a row going
-- away releases what the store holds and counts the rest as drift
DROP VIEW @extschema@.stats;
DROP FUNCTION @extschema@.stats();

#include "udfs/stats/1.4.sql"

CREATE VIEW @extschema@.stats AS SELECT * FROM @extschema@.stats();

REVOKE ALL ON FUNCTION @extschema@.stats() FROM PUBLIC;
REVOKE ALL ON @extschema@.stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.stats() TO pg_monitor;
GRANT SELECT ON @extschema@.stats TO pg_monitor;

#include "udfs/changed_in_transaction/1.4.sql"

#include "udfs/verify/1.4.sql"

-- A lease's row keeps the request that took it: should the store lose the
-- lease (a failover to a standby that had not received it), reconcile()
-- claims the committed rows' values again from it.
ALTER TABLE @extschema@.outstanding_leases ADD COLUMN request jsonb;
COMMENT ON COLUMN @extschema@.outstanding_leases.request IS
    'The claims_begin_update request of the lease (NULL for fences and rows written before 1.4)';

-- ---------------------------------------------------------------------------
-- Fences wait for transactions, not for pg_stat_activity.
--
-- reconcile() deleted a settled fence once pg_stat_activity showed no
-- session with an older xact_start. That view hides what a session does
-- when it runs with track_activities = off, and a writer it hides, frozen
-- between its begin_update and its local lease row, could insert that row
-- after the fence was gone and commit with a lease the store had rolled
-- back. A fence now records the virtual transaction ids running when it is
-- placed (after the listing that found its lease: the writer that holds the
-- lease is one of them) and is deleted only when all of them have ended,
-- tested on their locks as CREATE INDEX CONCURRENTLY waits; or when the
-- server restarted since it was placed. Fences placed before 1.4 record the
-- transactions running at the next pass.
-- ---------------------------------------------------------------------------
ALTER TABLE @extschema@.outstanding_leases ADD COLUMN fence_waits_for text[];
COMMENT ON COLUMN @extschema@.outstanding_leases.fence_waits_for IS
    'A fence''s: the virtual transaction ids running when it was placed; it is deleted only once all of them ended';

#include "udfs/running_transactions/1.4.sql"

#include "udfs/transactions_ended/1.4.sql"

#include "udfs/store_get_record/1.4.sql"

#include "udfs/rows_holding/1.4.sql"

#include "udfs/claim_again_lease/1.4.sql"

#include "udfs/claim_again/1.4.sql"

#include "udfs/reconcile/1.4.sql"

REVOKE ALL ON FUNCTION @extschema@.running_transactions(),
    @extschema@.transactions_ended(text[]) FROM PUBLIC;
-- ---------------------------------------------------------------------------
-- End of: fences wait for transactions.
-- ---------------------------------------------------------------------------

-- char(n) values are claimed without their padding from 1.4 on, as their
-- cast to text and verify() read them; the claims a cell made before hold
-- the padded form. The background worker verifies (and repairs) the
-- tables with such columns first: a run is started for each now. Until it
-- is done, another cell could claim a value's unpadded form.
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT DISTINCT c.table_name
               FROM @extschema@.claimed_attributes c
               JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.table_name
                    AND a.attnum OPERATOR(pg_catalog.=) c.attnum
              WHERE pg_catalog.format_type(a.atttypid, NULL) OPERATOR(pg_catalog.=) 'character'
                 OR EXISTS (SELECT 1 FROM pg_catalog.pg_type d
                             WHERE d.oid OPERATOR(pg_catalog.=) a.atttypid AND d.typtype OPERATOR(pg_catalog.=) 'd'
                               AND d.typbasetype OPERATOR(pg_catalog.=) 'pg_catalog.bpchar'::pg_catalog.regtype)
    LOOP
        INSERT INTO @extschema@.verify_progress (table_name, run_started_at) VALUES (t, pg_catalog.now())
            ON CONFLICT (table_name) DO UPDATE SET run_started_at = pg_catalog.now(), resume_after = NULL;
        RAISE NOTICE 'claims_cell: table % claims a char(n) column: run SELECT * FROM claims_cell.verify(%, repair => true) now (the background worker starts it too)',
            t, pg_catalog.quote_literal(t::pg_catalog.text);
    END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- Monitoring: reconcile() passes of the background worker that failed, the
-- number and total time of the calls that reached the store (averages over
-- any interval from two readings), and the cell's id in claims_cell.stats
-- (for the cell_id label of the Prometheus metrics in monitoring/;
-- pg_monitor cannot read the configuration table itself).
-- ---------------------------------------------------------------------------
DROP VIEW @extschema@.stats;
DROP FUNCTION @extschema@.stats();

#include "udfs/stats/1.4-2.sql"

-- cell_id is NULL until claims_cell.configure() ran
CREATE VIEW @extschema@.stats AS
SELECT s.*,
       (SELECT c.cell_id FROM @extschema@.configuration c) AS cell_id
  FROM @extschema@.stats() s;

REVOKE ALL ON FUNCTION @extschema@.stats() FROM PUBLIC;
REVOKE ALL ON @extschema@.stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.stats() TO pg_monitor;
GRANT SELECT ON @extschema@.stats TO pg_monitor;

-- ---------------------------------------------------------------------------
-- Immediate and deferred claims.
--
-- A claimed column is claimed at the end of each statement, as a unique
-- constraint is checked, unless it is deferrable and deferred (then at
-- COMMIT, as every claimed column was before 1.4). Declarations made
-- before 1.4 keep that: deferrable, initially deferred. New ones are
-- immediate unless claim_column says otherwise.
-- ---------------------------------------------------------------------------
ALTER TABLE @extschema@.claimed_attributes
    ADD COLUMN "deferrable" boolean NOT NULL DEFAULT true,
    ADD COLUMN initially_deferred boolean NOT NULL DEFAULT true,
    ADD CONSTRAINT claimed_attributes_deferred_is_deferrable CHECK ("deferrable" OR NOT initially_deferred);
ALTER TABLE @extschema@.claimed_attributes
    ALTER COLUMN "deferrable" SET DEFAULT false,
    ALTER COLUMN initially_deferred SET DEFAULT false;

CREATE OR REPLACE VIEW @extschema@.claimed_columns AS
SELECT c.table_name, a.attname AS column_name, c.bucket_type, c.subject_type,
       s.attname AS subject_column, c.source_type, k.attname AS source_column,
       c.enabled, c.trigger_name, c.created_at, c.updated_at,
       c."deferrable", c.initially_deferred
  FROM @extschema@.claimed_attributes c
  JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.table_name AND a.attnum OPERATOR(pg_catalog.=) c.attnum
  JOIN pg_catalog.pg_attribute s ON s.attrelid OPERATOR(pg_catalog.=) c.table_name AND s.attnum OPERATOR(pg_catalog.=) c.subject_attnum
  JOIN pg_catalog.pg_attribute k ON k.attrelid OPERATOR(pg_catalog.=) c.table_name AND k.attnum OPERATOR(pg_catalog.=) c.source_attnum;

DROP FUNCTION @extschema@.claim_column(regclass, name, text, text, name, text);
#include "udfs/claim_column/1.4.sql"

#include "udfs/claim_statement/1.4.sql"

#include "udfs/set_constraints/1.4.sql"

DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT DISTINCT c.table_name FROM @extschema@.claimed_attributes c
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger g
                        WHERE g.tgrelid OPERATOR(pg_catalog.=) t
                          AND g.tgname OPERATOR(pg_catalog.=) 'claims_cell_statement') THEN
            EXECUTE pg_catalog.format('CREATE TRIGGER claims_cell_statement AFTER INSERT OR UPDATE OR DELETE ON %s'
                                      ' FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claim_statement()', t);
        END IF;
    END LOOP;
END
$$;

#include "udfs/forget_dropped/1.4.sql"
-- ---------------------------------------------------------------------------
-- End of: immediate and deferred claims.
-- ---------------------------------------------------------------------------

#include "udfs/collect_truncate/1.4.sql"

DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT g.tgrelid FROM pg_catalog.pg_trigger g
              WHERE g.tgname OPERATOR(pg_catalog.=) 'claims_cell_truncate'
                AND g.tgfoid OPERATOR(pg_catalog.=) '@extschema@.refuse_truncate()'::pg_catalog.regprocedure
                AND g.tgrelid IN (SELECT c.table_name FROM @extschema@.claimed_attributes c)
    LOOP
        EXECUTE pg_catalog.format('DROP TRIGGER claims_cell_truncate ON %s', t);
        EXECUTE pg_catalog.format('CREATE TRIGGER claims_cell_truncate BEFORE TRUNCATE ON %s'
                                  ' FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.collect_truncate()', t);
    END LOOP;
END
$$;
-- ---------------------------------------------------------------------------
-- End of: TRUNCATE releases.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- A cell database knows it is itself: configure() records the cluster's
-- system identifier and the database's oid; a copy (CREATE DATABASE ...
-- TEMPLATE, a restore elsewhere, pg_upgrade) has another one of them and
-- claims nothing until configure() runs in it again.
-- ---------------------------------------------------------------------------
ALTER TABLE @extschema@.configuration
    ADD COLUMN system_identifier bigint,
    ADD COLUMN database_oid oid;
COMMENT ON COLUMN @extschema@.configuration.system_identifier IS
    'pg_control_system().system_identifier of the cluster configure() ran in';
COMMENT ON COLUMN @extschema@.configuration.database_oid IS
    'The oid of the database configure() ran in';
UPDATE @extschema@.configuration
   SET system_identifier = (SELECT s.system_identifier FROM pg_catalog.pg_control_system() s),
       database_oid = (SELECT d.oid FROM pg_catalog.pg_database d
                        WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database());
-- ---------------------------------------------------------------------------
-- End of: a cell database knows it is itself.
-- ---------------------------------------------------------------------------

#include "udfs/verify_slice/1.4.sql"

#include "udfs/verify_repair_lease/1.4.sql"
