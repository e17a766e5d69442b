/* claims_cell--1.0.sql: claim a cell's unique columns at a claims store. */

\echo Use "CREATE EXTENSION claims_cell" to load this file. \quit

#include "udfs/store_validator/1.0.sql"

CREATE FOREIGN DATA WRAPPER claims_cell_store VALIDATOR @extschema@.store_validator;

-- Which store server and which cell this database is (one row).
CREATE TABLE @extschema@.configuration (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    server_name name NOT NULL,
    cell_id     bigint NOT NULL CHECK (cell_id > 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE @extschema@.configuration IS 'The claims store server and this cell''s id (one row)';

-- Columns whose values are claimed at the store; triggers do the work.
-- Keyed by attribute number, so RENAME COLUMN and RENAME TABLE keep the
-- declaration; the view claimed_columns shows the current names.
CREATE TABLE @extschema@.claimed_attributes (
    table_name     regclass NOT NULL,
    attnum         smallint NOT NULL CHECK (attnum > 0),
    bucket_type    text NOT NULL,
    subject_type   text NOT NULL,
    subject_attnum smallint NOT NULL CHECK (subject_attnum > 0),
    source_type    text NOT NULL,
    source_attnum  smallint NOT NULL CHECK (source_attnum > 0),
    trigger_name   name NOT NULL,
    enabled        boolean NOT NULL DEFAULT true,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_name, attnum)
);
COMMENT ON TABLE @extschema@.claimed_attributes IS 'Columns claimed at the claims store, by attribute number';

CREATE VIEW @extschema@.claimed_columns AS
SELECT c.table_name, a.attname AS column_name, c.bucket_type, c.subject_type,
       s.attname AS subject_column, c.source_type, k.attname AS source_column,
       c.enabled, c.trigger_name, c.created_at, c.updated_at
  FROM @extschema@.claimed_attributes c
  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.table_name AND a.attnum = c.attnum
  JOIN pg_catalog.pg_attribute s ON s.attrelid = c.table_name AND s.attnum = c.subject_attnum
  JOIN pg_catalog.pg_attribute k ON k.attrelid = c.table_name AND k.attnum = c.source_attnum;
COMMENT ON VIEW @extschema@.claimed_columns IS 'Columns claimed at the claims store, with their current names';

-- One row per lease whose outcome at the store is not settled yet,
-- written by the local transaction that took the lease.
CREATE TABLE @extschema@.outstanding_leases (
    uuid       uuid PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE @extschema@.outstanding_leases IS 'Leases taken at the store whose commit or rollback is not confirmed';

SELECT pg_catalog.pg_extension_config_dump('@extschema@.configuration', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.claimed_attributes', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.outstanding_leases', '');

#include "udfs/configure/1.0.sql"

#include "udfs/claim_column/1.0.sql"

#include "udfs/set_claiming/1.0.sql"

#include "udfs/unclaim_column/1.0.sql"

#include "udfs/collect/1.0.sql"

#include "udfs/forget_dropped/1.0.sql"

CREATE EVENT TRIGGER claims_cell_forget_dropped ON sql_drop
    EXECUTE FUNCTION @extschema@.forget_dropped();

#include "udfs/refuse_truncate/1.0.sql"

#include "udfs/stats/1.0.sql"

CREATE VIEW @extschema@.stats AS SELECT * FROM @extschema@.stats();

REVOKE ALL ON TABLE @extschema@.configuration, @extschema@.claimed_attributes,
    @extschema@.claimed_columns, @extschema@.outstanding_leases FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.configure(name, bigint),
    @extschema@.claim_column(regclass, name, text, text, name, text),
    @extschema@.set_claiming(regclass, name, boolean),
    @extschema@.unclaim_column(regclass, name),
    @extschema@.forget_dropped(), @extschema@.stats(),
    @extschema@.collect(), @extschema@.refuse_truncate(),
    @extschema@.store_validator(text[], oid) FROM PUBLIC;
REVOKE ALL ON @extschema@.stats FROM PUBLIC;
GRANT USAGE ON SCHEMA @extschema@ TO pg_monitor;
GRANT EXECUTE ON FUNCTION @extschema@.stats() TO pg_monitor;
GRANT SELECT ON @extschema@.stats TO pg_monitor;
